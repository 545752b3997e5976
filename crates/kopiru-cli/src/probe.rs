//! `kopiru probe`: filesystem types and whether clone/offload work.

use crate::args::ProbeArgs;
use crate::exit;
use kopiru::probe::Trial;

pub fn run(args: ProbeArgs) -> u8 {
    let from = &args.paths[0];
    let to = args.paths.get(1).map(|p| p.as_path());
    let p = match kopiru::probe(from, to, &kopiru::probe::ProbeOptions::new(), &kopiru::Noop) {
        Ok(p) => p,
        Err(e) => {
            errln!("kopiru: {}", crate::render::error(&e));
            return exit::FAILED;
        }
    };
    let trial_json = |t: &Trial| serde_json::json!({ "works": t.works, "detail": t.detail });
    if args.json {
        let paths: Vec<_> = p
            .paths
            .iter()
            .map(|(path, fs)| serde_json::json!({ "path": crate::render::path(path), "filesystem": fs }))
            .collect();
        let v = serde_json::json!({
            "paths": paths,
            "clone": trial_json(&p.clone),
            "offload": trial_json(&p.offload),
        });
        outln!("{v}");
        return exit::OK;
    }
    for (path, fs) in &p.paths {
        outln!("{}: {fs}", crate::render::path(path));
    }
    let direction = match to {
        Some(t) => format!(
            "{} -> {}",
            crate::render::path(from),
            crate::render::path(t)
        ),
        None => format!("within {}", crate::render::path(from)),
    };
    for (name, t) in [("clone", &p.clone), ("offload", &p.offload)] {
        match &t.detail {
            None => outln!("{name:<8}{direction}: yes"),
            Some(d) => outln!("{name:<8}{direction}: no: {d}"),
        }
    }
    exit::OK
}
