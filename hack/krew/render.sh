#!/bin/sh
# render.sh VERSION URL_BASE DIST: writes DIST/toolplane.yaml, the krew
# manifest, from toolplane.yaml and one platform.yaml entry per plugin
# archive DIST/kubectl-toolplane_VERSION_OS_ARCH.tar.gz, each with its
# sha256 and its URL under URL_BASE.
set -eu
version=$1 base=$2 dist=$3
here=$(dirname "$0")
platforms=$(mktemp)
trap 'rm -f "$platforms"' EXIT
found=0
for archive in "$dist"/kubectl-toolplane_"$version"_*.tar.gz; do
	[ -e "$archive" ] || continue
	found=1
	name=$(basename "$archive")
	osarch=${name#kubectl-toolplane_"$version"_}
	osarch=${osarch%.tar.gz}
	os=${osarch%%_*} arch=${osarch#*_}
	sum=$(sha256sum "$archive" | cut -d' ' -f1)
	sed -e "s|{{OS}}|$os|" -e "s|{{ARCH}}|$arch|" -e "s|{{URL}}|$base/$name|" -e "s|{{SHA256}}|$sum|" \
		"$here/platform.yaml" >>"$platforms"
done
if [ "$found" = 0 ]; then
	echo "render.sh: no plugin archives kubectl-toolplane_${version}_*.tar.gz in $dist" >&2
	exit 1
fi
sed -e "s|{{VERSION}}|$version|g" -e '/^#/d' "$here/toolplane.yaml" | awk -v f="$platforms" '
	/^\{\{PLATFORMS\}\}$/ { while ((getline line < f) > 0) print line; next }
	{ print }' >"$dist/toolplane.yaml"
if grep -n '{{' "$dist/toolplane.yaml" >&2; then
	echo "render.sh: placeholders left in $dist/toolplane.yaml" >&2
	exit 1
fi
echo "wrote $dist/toolplane.yaml"
