#!/usr/bin/env bash
# Before publishing: the tag that started the release (v0.1.0) is the version of every
# distribution in DIR, so that a tag never publishes files of another version.
#
#   ci/check_release_version.sh TAG DIR
set -euo pipefail
tag=${1:?usage: ci/check_release_version.sh TAG DIR}
dir=${2:?usage: ci/check_release_version.sh TAG DIR}
version=${tag#v}
count=0
for f in "$dir"/*.whl "$dir"/*.tar.gz; do
  [[ -e "$f" ]] || continue
  count=$((count + 1))
  case "$(basename "$f")" in
    *-"$version"-*.whl | *-"$version".tar.gz) ;;
    *)
      echo "check_release_version: $(basename "$f") is not version $version (tag $tag)" >&2
      exit 1
      ;;
  esac
done
if [[ $count -eq 0 ]]; then
  echo "check_release_version: no distribution in $dir" >&2
  exit 1
fi
echo "check_release_version: $count distributions, all $version"
