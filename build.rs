//! Rebuilds the crate when a migration or the development schema changes: both are
//! embedded at compile time (`sqlx::migrate!`, `include_str!`), and without this a removed or
//! added migration file would not trigger a rebuild.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=sql");
}
