#[test]
fn show() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for h in ["picture"] {
        let cfg = cbindgen::Config::from_file(root.join(format!("cbindgen/{h}.toml"))).unwrap();
        let b = cbindgen::Builder::new().with_config(cfg).with_src(root.join(format!("src/ffi/{h}.rs"))).generate().unwrap();
        let mut out = Vec::new();
        b.write(&mut out);
        println!("{}", String::from_utf8(out).unwrap());
    }
}
