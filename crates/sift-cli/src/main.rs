fn main() {
    println!("sift: placeholder");
}
