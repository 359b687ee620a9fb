//! Compiles log/protos with protox (a pure-Rust protobuf compiler: no system protoc needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=protos");
    let descriptors = protox::compile(["strata/v1/events.proto"], ["protos"])?;
    prost_build::Config::new()
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
