//! The architecture's rules, checked on the source text (ARCHITECTURE.md, "Rules"):
//!
//! - detection (`crates/detect`) reaches no I/O: its only dependencies are `serde`,
//!   `serde_json` and `memchr`, and its `clippy.toml` forbids the std I/O, clock and
//!   process APIs;
//! - `recover` knows no broker and no HTTP;
//! - `backfill`, `admin` and the commands of `cmd` import nothing from each other;
//! - the smaller rooms import only what their module docs allow (see [`RULES`]);
//! - no import circle, between rooms or between modules at any depth;
//! - every module's "May depend on" header names what it imports from other rooms;
//! - nothing in the repository reads `../shared` (a fresh clone has nothing beside it).
//!
//! A room is a top-level module: `src/x.rs` together with `src/x/`. What a room imports is
//! every `crate::<room>` path in its files, and every external crate path named in
//! [`EXTERNAL`]. Plain text, no parser: a rule broken inside a comment fails too, which
//! only asks for a better comment.

#[path = "layers/modules.rs"]
mod modules;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// External crates the rules talk about.
const EXTERNAL: &[&str] = &["lapin", "axum", "sqlx", "tokio"];

/// (room, rooms and crates it must not import, why).
const RULES: &[(&str, &[&str], &str)] = &[
    (
        "ids",
        &["*"],
        "every module may name a message, so ids import nothing",
    ),
    (
        "budget",
        &[
            "admin", "amqp", "backfill", "cmd", "event", "http", "ids", "ledger", "metrics",
            "model", "outbound", "publish", "recover", "settings", "startup", "store", "worker",
            "lapin", "sqlx", "axum",
        ],
        "the byte budget is shared by the worker and the admin API: it knows neither",
    ),
    (
        "model",
        &[
            "admin", "amqp", "backfill", "cmd", "event", "http", "ledger", "metrics", "outbound",
            "publish", "recover", "settings", "startup", "store", "worker", "lapin", "sqlx",
            "axum", "tokio",
        ],
        "the model label is a few slices of a string, labelled on the clean path",
    ),
    (
        "event",
        &[
            "recover", "publish", "outbound", "amqp", "worker", "store", "lapin", "sqlx", "axum",
        ],
        "decoding is pure",
    ),
    (
        "recover",
        &[
            "amqp", "publish", "http", "admin", "worker", "backfill", "cmd", "startup", "lapin",
            "axum",
        ],
        "recover knows no broker and no HTTP",
    ),
    (
        "outbound",
        &[
            "amqp", "publish", "http", "admin", "worker", "backfill", "cmd", "store", "lapin",
            "sqlx", "axum", "tokio",
        ],
        "the bodies of what is published are plain data",
    ),
    (
        "outbox",
        &[
            "recover", "publish", "amqp", "outbound", "http", "admin", "worker", "backfill", "cmd",
            "startup", "lapin", "axum",
        ],
        "the outbox stores and hands back rows: it knows neither who owes them nor the broker",
    ),
    (
        "publish",
        &[
            "http", "admin", "worker", "backfill", "cmd", "startup", "axum",
        ],
        "publishing knows who asks only through what it is given",
    ),
    (
        "backfill",
        &["admin", "cmd", "worker", "startup"],
        "three ways into recover and publish",
    ),
    (
        "admin",
        &["backfill", "cmd", "worker", "startup"],
        "three ways into recover and publish",
    ),
    (
        "cmd",
        &["backfill", "admin", "worker", "startup"],
        "three ways into recover and publish",
    ),
    (
        "ledger",
        &[
            "amqp", "publish", "http", "admin", "worker", "backfill", "cmd", "startup", "lapin",
            "axum",
        ],
        "the ledger's read side only reads",
    ),
    (
        "settings",
        &[
            "admin", "worker", "backfill", "cmd", "startup", "publish", "amqp", "store", "http",
            "lapin", "sqlx", "axum",
        ],
        "every module imports settings; settings imports nothing that imports it",
    ),
    (
        "amqp",
        &[
            "recover", "worker", "admin", "backfill", "cmd", "sqlx", "axum",
        ],
        "the broker session knows nothing about recovery",
    ),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    files_where(dir, &|p| p.extension().is_some_and(|e| e == "rs"), out);
}

fn files_where(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                files_where(&path, keep, out);
            }
        } else if keep(&path) {
            out.push(path);
        }
    }
}

/// room -> (file, imported room or crate) for every file under `src/`.
fn imports() -> BTreeMap<String, Vec<(String, String)>> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut by_room: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for file in files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let room = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let mut found: Vec<String> = crate_paths(&text);
        for ext in EXTERNAL {
            if mentions_crate(&text, ext) {
                found.push(ext.to_string());
            }
        }
        let entry = by_room.entry(room.clone()).or_default();
        for f in found {
            if f != room {
                entry.push((rel.clone(), f));
            }
        }
    }
    by_room
}

/// The rooms named as `crate::<room>` (also inside `use crate::{a, b}` groups).
fn crate_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        // `toolcall_crate::` or `some_crate::` are not ours.
        if text[..i]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

fn mentions_crate(text: &str, name: &str) -> bool {
    let needle = format!("{name}::");
    text.match_indices(&needle).any(|(i, _)| {
        !text[..i]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

#[test]
fn rooms_import_only_what_the_architecture_allows() {
    let imports = imports();
    let mut broken = Vec::new();
    for (room, forbidden, why) in RULES {
        let Some(found) = imports.get(*room) else {
            broken.push(format!("room `{room}` named in the rules does not exist"));
            continue;
        };
        for (file, imported) in found {
            let crate_room = imports.contains_key(imported);
            let external = EXTERNAL.contains(&imported.as_str());
            if forbidden.contains(&imported.as_str())
                || (forbidden.contains(&"*") && (crate_room || external))
            {
                broken.push(format!("src/{file} imports `{imported}` ({why})"));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// No module imports its way back to itself, between rooms (`amqp` -> `publish` ->
/// `amqp`) or between modules at any depth (`recover::outbox` -> `recover::revert` ->
/// `recover::outbox`): a circle means neither side can be read, changed or tested without
/// the other.
#[test]
fn no_import_circles() {
    let modules = modules::read(&root().join("src"));
    let graph = modules::imports(&modules);
    let mut found = Vec::new();
    for circle in modules::circles(&modules::between_rooms(&graph)) {
        found.push(format!("rooms: {}", circle.join(" <-> ")));
    }
    for circle in modules::circles(&graph) {
        found.push(format!("modules: {}", circle.join(" <-> ")));
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// Every module says what it may depend on ("May depend on:" in its module docs), and its
/// imports from other rooms (and of the crates in [`EXTERNAL`]) are among what it names;
/// so are those of every file of the room against the room's own header. Imports inside a
/// room are the room's business.
#[test]
fn module_headers_name_what_the_module_imports() {
    let modules = modules::read(&root().join("src"));
    let graph = modules::imports(&modules);
    let header_of = |path: &str| {
        modules
            .iter()
            .find(|m| m.path == path)
            .and_then(|m| m.header.as_ref())
    };
    let mut broken = Vec::new();
    for m in &modules {
        let Some(own) = m.header.as_ref() else {
            broken.push(format!(
                "{}: no \"May depend on:\" in its module docs",
                m.file
            ));
            continue;
        };
        let room = header_of(m.room());
        let mut used: Vec<String> = graph[&m.path]
            .iter()
            .filter(|t| modules::room_of(t) != m.room())
            .cloned()
            .collect();
        let modules_used = used.len();
        used.extend(
            EXTERNAL
                .iter()
                .filter(|e| mentions_crate(&m.code, e))
                .map(|e| e.to_string()),
        );
        for (i, target) in used.into_iter().enumerate() {
            let module = i < modules_used;
            if !own.allows(&target, module) {
                broken.push(format!(
                    "{} imports `{target}`; its header does not say so",
                    m.file
                ));
            }
            if room.is_some_and(|h| !h.allows(&target, module)) {
                broken.push(format!(
                    "{} imports `{target}`; the header of its room `{}` does not say so",
                    m.file,
                    m.room()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn commands_do_not_import_each_other() {
    let dir = root().join("src/cmd");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_stem().map(|s| s.to_string_lossy().to_string()))
        .filter(|n| n != "mod")
        .collect();
    let mut broken = Vec::new();
    for file in &files {
        let me = file.file_stem().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(file).unwrap();
        for other in names.iter().filter(|n| **n != me) {
            if text.contains(&format!("cmd::{other}")) || text.contains(&format!("super::{other}"))
            {
                broken.push(format!("src/cmd/{me}.rs imports cmd::{other}"));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn detection_has_no_io_dependency() {
    let manifest = std::fs::read_to_string(root().join("crates/detect/Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    let names: Vec<&str> = deps
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split(['=', '.']).next())
        .map(str::trim)
        .collect();
    assert_eq!(names, ["serde", "serde_json", "memchr"], "{deps}");
    let clippy = std::fs::read_to_string(root().join("crates/detect/clippy.toml")).unwrap();
    for banned in [
        "std::fs",
        "std::net",
        "std::time",
        "std::process",
        "std::env",
        "std::thread",
    ] {
        assert!(
            clippy.contains(banned),
            "crates/detect/clippy.toml bans {banned}"
        );
    }
}

#[test]
fn nothing_reads_beside_the_repository() {
    // Code, scripts and manifests: what a test or the product could read from.
    let code = |p: &Path| {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        name == "run"
            || ["rs", "toml", "sh", "py", "yml", "yaml"]
                .iter()
                .any(|e| name.ends_with(&format!(".{e}")))
    };
    let mut files = Vec::new();
    for dir in [
        "src", "tests", "crates", "examples", "scripts", "ci", ".ci", "fuzz", "helm", "deploy",
    ] {
        files_where(&root().join(dir), &code, &mut files);
    }
    files.push(root().join("Cargo.toml"));
    files.push(root().join("docker-compose.yml"));
    let me = root().join("tests/layers.rs");
    let needle = ["..", "/shared"].concat();
    let broken: Vec<String> = files
        .iter()
        .filter(|f| **f != me)
        .filter(|f| {
            std::fs::read_to_string(f)
                .map(|t| t.contains(&needle))
                .unwrap_or(false)
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        broken.is_empty(),
        "these read beside the repository, which a fresh clone does not have:\n{}",
        broken.join("\n")
    );
}

/// The worker's migrations run while older replicas keep writing (a rolling upgrade): from
/// 0006 on, none may hold a long exclusive lock. An index on a table that exists already is
/// built `CONCURRENTLY`, alone in a `-- no-transaction` file (the runner,
/// `store::migrations`, waits for its lock without a snapshot and drops an INVALID leftover
/// first); no CHECK, foreign key or NOT NULL that scans existing rows, no column type
/// change, and an ALTER TABLE only with a `lock_timeout`, so that it gives up rather than
/// queue every writer behind it. 0002-0005 were applied by earlier releases and stay as they
/// are.
#[test]
fn migrations_take_no_long_lock() {
    let dir = root().join("migrations");
    let mut broken = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let version: u32 = name.split('_').next().unwrap().parse().unwrap();
        if version < 6 {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for problem in long_locks(&text) {
            broken.push(format!("{name}: {problem}"));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// What in one migration file would hold a long lock.
fn long_locks(text: &str) -> Vec<String> {
    let no_tx = text.starts_with("-- no-transaction");
    let sql: String = text
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
        .to_lowercase();
    let created: Vec<String> = sql
        .match_indices("create table ")
        .map(|(i, _)| {
            sql[i + "create table ".len()..]
                .trim_start_matches("if not exists ")
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    let statements: Vec<String> = sql
        .split(';')
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|s| !s.is_empty())
        .collect();
    let mut broken = Vec::new();
    if no_tx && statements.len() != 1 {
        broken.push(format!(
            "a -- no-transaction file holds one concurrent index build, not {} statements",
            statements.len()
        ));
    }
    for words in &statements {
        let concurrently = words.contains(" concurrently ");
        if concurrently && !no_tx {
            broken.push(format!(
                "a concurrent build cannot run in a transaction (a -- no-transaction file of \
                 its own): {words}"
            ));
        }
        if no_tx && !(words.starts_with("create") && concurrently) {
            broken.push(format!(
                "a -- no-transaction file holds a concurrent index build only: {words}"
            ));
        }
        if words.starts_with("create index") || words.starts_with("create unique index") {
            let table = words
                .split(" on ")
                .nth(1)
                .map(|t| t.trim_start_matches("only "))
                .and_then(|t| t.split(|c: char| !c.is_alphanumeric() && c != '_').next())
                .unwrap_or("");
            if !concurrently && !created.iter().any(|c| c == table) {
                broken.push(format!(
                    "an index on the existing table {table} built without CONCURRENTLY: {words}"
                ));
            }
        }
        if words.starts_with("alter table") {
            if (words.contains(" check ")
                || words.contains(" check(")
                || words.contains("foreign key")
                || words.contains(" references "))
                && !words.contains("not valid")
            {
                broken.push(format!("a constraint that scans existing rows: {words}"));
            }
            if words.contains("set not null") || words.contains(" type ") {
                broken.push(format!("a change that scans or rewrites: {words}"));
            }
            if !sql.contains("lock_timeout") {
                broken.push(format!("ALTER TABLE without a lock_timeout: {words}"));
            }
        }
    }
    broken
}

#[test]
fn the_migration_lint_refuses_long_locks_and_allows_the_safe_forms() {
    let refused = [
        "SET LOCAL lock_timeout = '5s'; ALTER TABLE recoveries ADD COLUMN x int CHECK (x > 0);",
        "SET LOCAL lock_timeout = '5s'; ALTER TABLE recoveries ALTER COLUMN outcome TYPE varchar(9);",
        "ALTER TABLE recoveries ADD COLUMN model text;",
        "CREATE INDEX recoveries_x_idx ON recoveries (created_at);",
        "CREATE INDEX CONCURRENTLY recoveries_x_idx ON recoveries (created_at);",
        "-- no-transaction\nCREATE INDEX CONCURRENTLY a ON recoveries (id);\n\
         CREATE INDEX CONCURRENTLY b ON recoveries (id);",
        "-- no-transaction\nSET LOCAL lock_timeout = '5s'; ALTER TABLE recoveries ADD COLUMN y text;",
    ];
    for sql in refused {
        assert!(!long_locks(sql).is_empty(), "allowed: {sql}");
    }
    let allowed = [
        "SET LOCAL lock_timeout = '5s';\nALTER TABLE recoveries ADD COLUMN model text NULL;",
        "-- no-transaction\n-- why\nCREATE INDEX CONCURRENTLY IF NOT EXISTS r_idx \
         ON recoveries (created_at);",
        "CREATE TABLE t (id bigint PRIMARY KEY, s text CHECK (s <> ''));\n\
         CREATE INDEX t_s_idx ON t (s);",
    ];
    for sql in allowed {
        assert!(
            long_locks(sql).is_empty(),
            "refused: {sql}: {:?}",
            long_locks(sql)
        );
    }
}
