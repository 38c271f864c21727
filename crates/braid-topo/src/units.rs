//! Human units live in their own crate (`braid-units`) so that middleware configs can use them
//! without depending on the network description; re-exported here for existing users.
pub use braid_units::*;
