//! Several servers on one database: following what the others store (`follow`). The lease that
//! picks the one server running the background jobs is `crate::lease`, a layer below: the jobs
//! it gates are below this one.

pub mod follow;
