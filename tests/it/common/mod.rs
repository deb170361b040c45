pub mod https;
pub mod nginx;
pub mod sandbox;
pub mod testca;

pub mod spawn;
