//! The web console's files (console/) are embedded by `include_dir!`, which cargo does not
//! track: rebuild the crate when one of them changes.

fn main() {
    println!("cargo:rerun-if-changed=console");
}
