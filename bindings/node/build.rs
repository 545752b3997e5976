fn main() {
    // napi-build reads LIBNODE_PATH (the Windows build's import library)
    // but does not ask to run again when it changes, so a build would keep
    // linking against a directory that is gone.
    println!("cargo:rerun-if-env-changed=LIBNODE_PATH");
    napi_build::setup();
}
