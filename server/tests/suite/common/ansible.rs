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
