//! The HTTP edge below the routes: accepting connections ([`listener`]), HTTPS ([`tls`]), and
//! which requests are served when ([`admission`]).

pub mod admission;
pub mod listener;
pub mod tls;
