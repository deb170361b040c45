pub mod https;
pub mod listen;
pub mod nginx;
pub mod sandbox;
pub mod testca;

pub mod spawn;
