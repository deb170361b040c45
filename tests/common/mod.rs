pub mod sandbox;
