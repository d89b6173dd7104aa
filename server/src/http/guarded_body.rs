//! An answer's body that holds what its request took (its request slot, its credential's
//! share) until its last byte has gone, and ends with an error at a deadline: a streamed answer
//! is work and memory for as long as it is read, not only until its headers went.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use tokio::time::Sleep;

/// `inner`, holding `guard` until it ends or is dropped, and failing once `within` has passed.
pub fn guarded<G: Send + Unpin + 'static>(inner: Body, guard: G, within: Duration) -> Body {
    Body::new(Guarded {
        inner,
        _guard: guard,
        deadline: Box::pin(tokio::time::sleep(within)),
        within,
    })
}

struct Guarded<G> {
    inner: Body,
    _guard: G,
    deadline: Pin<Box<Sleep>>,
    within: Duration,
}

impl<G> http_body::Body for Guarded<G>
where
    G: Send + Unpin + 'static,
{
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.deadline.as_mut().poll(cx).is_ready() {
            // The client sees a broken answer, never a short one that looks whole.
            let within = self.within.as_secs();
            return Poll::Ready(Some(Err(axum::Error::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the answer was not read within {within} s"),
            )))));
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use http_body_util::BodyExt;

    use super::*;

    struct Flag(Arc<AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn the_guard_is_held_until_the_body_is_read_to_its_end() {
        let dropped = Arc::new(AtomicBool::new(false));
        let chunks =
            futures_util::stream::iter(["a", "b"].map(|c| Ok::<_, std::io::Error>(Bytes::from(c))));
        let body = guarded(
            Body::from_stream(chunks),
            Flag(dropped.clone()),
            Duration::from_secs(60),
        );
        assert!(!dropped.load(Ordering::SeqCst));
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(bytes, "ab");
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_not_read_by_its_deadline_fails() {
        let never = futures_util::stream::pending::<Result<Bytes, std::io::Error>>();
        let body = guarded(Body::from_stream(never), (), Duration::from_secs(5));
        let read = body.collect().await;
        assert!(read.is_err());
    }
}
