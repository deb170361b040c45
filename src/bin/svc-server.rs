fn main() {
    println!("svc-server");
}
