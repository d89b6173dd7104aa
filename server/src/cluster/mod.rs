//! Several servers on one database: the lease that picks the one running the background jobs,
//! and following what the others store.

pub mod follow;
pub mod lease;
