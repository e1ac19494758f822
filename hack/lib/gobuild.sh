# Shared by the hack/install-*.sh scripts, which build the test bed's
# binaries from the Go module proxy into versioned folders of the cache.
# Source it after setting LOG_PREFIX; it defines:
#
#   say MESSAGE...                  progress on stderr
#   version_is BIN LINE ARGS...     BIN exists and `BIN ARGS` prints LINE
#   version_has BIN TEXT ARGS...    BIN exists and `BIN ARGS` prints TEXT
#   gomod_of MODULE@VERSION         path of that version's downloaded go.mod
#   bed_module DIR                  a throwaway module in DIR that requires
#                                   every program the bed builds (below);
#                                   sets K8S_LDFLAGS for `go build -ldflags`;
#                                   a second call for DIR does nothing
#   timed COMMAND...                runs COMMAND, then says how long it took
#
# The versions of what the bed builds are set here, once. Every install
# script builds from the same throwaway module, so the module graph is the
# same in each: a package that Kubernetes, helm, etcd and containerd share
# (k8s.io/api, client-go, grpc, ...) compiles once into the Go build cache
# and the next script finds it there. On a cold cache that is most of helm
# and etcd, and a third of containerd.
#
# The throwaway modules must not see the project's go.work or flags, so this
# also exports GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0.

K8S_VERSION="${K8S_VERSION:-v1.37.1}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
HELM_VERSION="${HELM_VERSION:-v4.3.1}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
# Module paths carry their major version (helm.sh/helm/v4).
HELM_MODULE="helm.sh/helm/${HELM_VERSION%%.*}"
ETCD_MODULE="go.etcd.io/etcd/server/${ETCD_VERSION%%.*}"
CONTAINERD_MODULE="github.com/containerd/containerd/${CONTAINERD_VERSION%%.*}"

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

timed() { # command...
	local start=$SECONDS
	"$@"
	say "took $((SECONDS - start)) s"
}

bed_module() { # dir
	local dir=$1 minor staging mod info stamp ldflags pkg required
	[ ! -f "$dir/go.mod" ] || return 0
	minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
	staging="v0.${K8S_VERSION#v1.}"
	mod="$(gomod_of "k8s.io/kubernetes@$K8S_VERSION")"
	[ -s "$mod" ] || { say "cannot fetch go.mod of k8s.io/kubernetes@$K8S_VERSION"; exit 1; }
	mkdir -p "$dir"
	required="$(awk '/^require \(/ {q=1; next} q && /^\)/ {q=0} q {print $1}' "$mod")"
	# k8s.io/kubernetes replaces its staging modules with local paths, which a
	# dependent module cannot follow; point each one it requires at the
	# published v0.X.Y release instead. etcd's and containerd's own go.mod
	# files have replace directives too, which is why they are built as
	# requirements here rather than with `go install pkg@version`.
	{
		echo "module warmer.local/bed-assets"
		echo "go $(go env GOVERSION | sed 's/^go//; s/[^0-9.].*//')"
		echo "require ("
		printf '\t%s %s\n' k8s.io/kubernetes "$K8S_VERSION" "$HELM_MODULE" "$HELM_VERSION" \
			"$ETCD_MODULE" "$ETCD_VERSION" "$CONTAINERD_MODULE" "$CONTAINERD_VERSION"
		echo ")"
		echo "replace ("
		awk '/^replace \(/ {r=1; next} r && /^\)/ {r=0} r && $2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$mod" |
			while read -r m; do
				if grep -qxF "$m" <<<"$required"; then
					printf '\t%s => %s %s\n' "$m" "$m" "$staging"
				fi
			done
		echo ")"
	} >"$dir/go.mod"
	(cd "$dir" && go mod download k8s.io/kubernetes "$HELM_MODULE" "$ETCD_MODULE" "$CONTAINERD_MODULE")
	# The release's time, from the proxy's .info file, is the build date.
	info="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"Info": "\(.*\)",*$/\1/p')"
	stamp="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info" 2>/dev/null || true)"
	# Without these the binaries call themselves v0.0.0-master and clients warn.
	ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=${stamp:-1970-01-01T00:00:00Z}"
	done
	K8S_LDFLAGS="$ldflags"
}
