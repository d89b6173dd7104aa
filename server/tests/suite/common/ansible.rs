//! The Ansible collection of `contrib/ansible` as the tests run it: installed as an admin would,
//! and its playbooks run with `ansible-playbook` (Debian's ansible, which scripts/test.sh
//! installs).

use std::path::Path;
use std::process::Command;

use super::processes::repo_root;

/// The collection of `contrib/ansible`, installed into `dir` as an admin would
/// (`ansible-galaxy collection install contrib/ansible`); the path to give
/// `ANSIBLE_COLLECTIONS_PATH`, with Debian's collections (community.general) after it.
pub fn install_collection(dir: &Path) -> String {
    let out = Command::new("ansible-galaxy")
        .args(["collection", "install", "--no-deps", "-p"])
        .arg(dir)
        .arg(repo_root().join("contrib/ansible"))
        .output()
        .expect("ansible-galaxy (Debian's ansible-core; scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!("{}:/usr/lib/python3/dist-packages", dir.display())
}

/// Runs a playbook of the collection with `args`; returns whether it succeeded, and its output.
pub fn playbook(collections: &str, work: &Path, name: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("ansible-playbook")
        .arg(format!("tickscope.fleet.{name}"))
        .args(args)
        .env("ANSIBLE_COLLECTIONS_PATH", collections)
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_HOST_KEY_CHECKING", "False")
        .env("ANSIBLE_LOCAL_TEMP", work.join("ansible-tmp"))
        .current_dir(work)
        .output()
        .expect("ansible-playbook");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// What an admin runs a change playbook with, written into a work directory: the plan's
/// inventory as the server exports it, their own inventory (how each host is reached), and
/// the variables (the server, its tokens), with the collection installed beside them.
pub struct ChangeRun {
    collections: String,
    work: std::path::PathBuf,
    args: Vec<String>,
}

impl ChangeRun {
    /// Writes `plan.yml`, `mine.yml` and `vars.yml` into `work`; the playbooks run on `limit`.
    pub fn prepare(
        work: &Path,
        plan_inventory: &str,
        own_inventory: &str,
        vars: &serde_json::Value,
        limit: &str,
    ) -> ChangeRun {
        std::fs::write(work.join("plan.yml"), plan_inventory).unwrap();
        std::fs::write(work.join("mine.yml"), own_inventory).unwrap();
        std::fs::write(work.join("vars.yml"), vars.to_string()).unwrap();
        let args = [
            "-i",
            "plan.yml",
            "-i",
            "mine.yml",
            "-e",
            "@vars.yml",
            "--limit",
            limit,
        ];
        ChangeRun {
            collections: install_collection(&work.join("collections")),
            work: work.to_path_buf(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// Runs playbook `name` with `extra` arguments (`--check`); whether it succeeded, and its
    /// output.
    pub fn run(&self, name: &str, extra: &[&str]) -> (bool, String) {
        let args: Vec<&str> = self
            .args
            .iter()
            .map(String::as_str)
            .chain(extra.iter().copied())
            .collect();
        playbook(&self.collections, &self.work, name, &args)
    }
}
