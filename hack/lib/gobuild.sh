# Shared by the hack/install-*-assets.sh scripts, which build the test bed's
# binaries from the Go module proxy into versioned folders of the cache.
# Source it after setting LOG_PREFIX; it defines:
#
#   say MESSAGE...                  progress on stderr
#   version_is BIN LINE ARGS...     BIN exists and `BIN ARGS` prints LINE
#   version_has BIN TEXT ARGS...    BIN exists and `BIN ARGS` prints TEXT
#   gomod_of MODULE@VERSION         path of that version's downloaded go.mod
#   k8s_module DIR                  a throwaway module in DIR that builds
#                                   k8s.io/kubernetes/cmd/... at K8S_VERSION;
#                                   sets K8S_LDFLAGS for `go build -ldflags`
#
# The throwaway modules must not see the project's go.work or flags, so this
# also exports GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0.

export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0

say() { echo "[${LOG_PREFIX:-assets}] $*" >&2; }

version_is() { # binary, wanted line, version args...
	local bin=$1 want=$2; shift 2
	[ -x "$bin" ] && "$bin" "$@" 2>/dev/null | grep -qxF -- "$want"
}

version_has() { # binary, wanted text, version args...
	local bin=$1 want=$2; shift 2
	[ -x "$bin" ] && "$bin" "$@" 2>/dev/null | grep -qF -- "$want"
}

gomod_of() { # module@version -> path of its downloaded go.mod
	go mod download -json "$1" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p'
}

k8s_module() { # dir
	local dir=$1 minor staging mod stamp ldflags pkg required
	minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
	staging="v0.${K8S_VERSION#v1.}"
	mod="$(gomod_of "k8s.io/kubernetes@$K8S_VERSION")"
	[ -s "$mod" ] || { say "cannot fetch go.mod of k8s.io/kubernetes@$K8S_VERSION"; exit 1; }
	mkdir -p "$dir"
	required="$(awk '/^require \(/ {q=1; next} q && /^\)/ {q=0} q {print $1}' "$mod")"
	# k8s.io/kubernetes replaces its staging modules with local paths, which a
	# dependent module cannot follow; point each one it requires at the
	# published v0.X.Y release instead.
	{
		echo "module warmer.local/k8s-assets"
		echo "go $(awk '$1 == "go" {print $2; exit}' "$mod")"
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo "replace ("
		awk '/^replace \(/ {r=1; next} r && /^\)/ {r=0} r && $2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$mod" |
			while read -r m; do
				if grep -qxF "$m" <<<"$required"; then
					printf '\t%s => %s %s\n' "$m" "$m" "$staging"
				fi
			done
		echo ")"
	} >"$dir/go.mod"
	(cd "$dir" && go mod download k8s.io/kubernetes)
	stamp="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"Time": "\(.*\)",*$/\1/p' | head -1)"
	# Without these the binaries call themselves v0.0.0-master and clients warn.
	ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=${stamp:-1970-01-01T00:00:00Z}"
	done
	K8S_LDFLAGS="$ldflags"
}
