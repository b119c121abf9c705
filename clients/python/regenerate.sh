#!/usr/bin/env bash
# Regenerate the typed API client from the portal's OpenAPI schema: the one command to run after an API change.
#
#   clients/python/regenerate.sh [OUTPUT_DIR]
#
# Writes OUTPUT_DIR/openapi.yaml (the schema, as `manage.py spectacular` prints it) and
# OUTPUT_DIR/gpu_portal_client/ (openapi-python-client, configured by openapi-generator.yaml); OUTPUT_DIR
# defaults to clients/python. Deterministic: the same schema, generator and ruff versions give the same files
# (tests/clients/test_client_generated.py checks that the committed files are current).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "${1:-$here}" && cd "${1:-$here}" && pwd)
python=${PYTHON:-$root/.venv/bin/python}
bin=$(dirname "$python")
export PATH="$bin:$PATH"  # the post hooks run this environment's ruff

cd "$root"
DJANGO_SETTINGS_MODULE=portal.settings.test "$python" manage.py spectacular --validate --fail-on-warn \
  --file "$out/openapi.yaml"
rm -rf "$out/gpu_portal_client"  # --overwrite keeps files outside api/ and models/: start clean
"$python" -m openapi_python_client generate --path "$out/openapi.yaml" --config "$here/openapi-generator.yaml" \
  --meta none --output-path "$out/gpu_portal_client"
