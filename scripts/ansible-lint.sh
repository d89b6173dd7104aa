#!/usr/bin/env bash
# Checks the Ansible collection of contrib/ansible as an admin would install it: ansible-galaxy
# installs it into a scratch directory, ansible-lint (Debian's) checks it with the production
# profile, and ansible-playbook --syntax-check reads every playbook. community.general (its xml
# module) comes from Debian's ansible package.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
scratch=$(mktemp -d /tmp/tickscope-ansible.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
ansible-galaxy collection install --no-deps -p "$scratch" "$repo/contrib/ansible" >/dev/null
export ANSIBLE_COLLECTIONS_PATH=$scratch:/usr/lib/python3/dist-packages
export ANSIBLE_NOCOLOR=1
(cd "$scratch/ansible_collections/tickscope/fleet" && ansible-lint --profile production --nocolor)
printf 'all:\n  hosts:\n    h:\n' >"$scratch/inventory.yml"
for book in "$repo"/contrib/ansible/playbooks/*.yml; do
    name=$(basename "$book" .yml)
    ansible-playbook -i "$scratch/inventory.yml" --syntax-check "tickscope.fleet.$name" >/dev/null
    echo "ansible-lint.sh: $name: syntax ok" >&2
done
