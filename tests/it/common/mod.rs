pub mod mgmt;
pub mod sandbox;
pub mod testca;
pub mod tls;
