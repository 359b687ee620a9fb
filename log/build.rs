//! Compiles log/protos with protox (a pure-Rust protobuf compiler: no system protoc needed), and
//! keeps the descriptor set it compiled (`$OUT_DIR/strata.v1.binpb`, the crate's
//! `FILE_DESCRIPTOR_SET`) for the contract test against the frozen one beside the .proto.

use protox::prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=protos");
    let descriptors = protox::compile(["strata/v1/events.proto"], ["protos"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("strata.v1.binpb"), descriptors.encode_to_vec())?;
    prost_build::Config::new()
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
