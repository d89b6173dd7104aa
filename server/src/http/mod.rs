//! The HTTP edge below the routes: accepting connections ([`listener`], with the PROXY protocol
//! of trusted balancers: [`proxy_protocol`]), HTTPS ([`tls`]), where a request comes from
//! ([`client`]), what each credential has in use ([`spending`]), and which requests are served
//! when ([`admission`], whose answers hold their slots to the last byte: [`guarded_body`]).

pub mod admission;
pub mod client;
pub mod guarded_body;
pub mod listener;
pub mod proxy_protocol;
pub mod spending;
pub mod tls;
