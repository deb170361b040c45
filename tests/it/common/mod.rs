pub mod mgmt;
pub mod nginx;
pub mod sandbox;
pub mod testca;
pub mod tls;
