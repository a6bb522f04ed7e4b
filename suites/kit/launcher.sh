#!/bin/sh
# mallocsweep kit launcher (written into a kit by `mallocsweep kit build`; suites/kit/launcher.sh).
#
# Runs the mallocsweep installed in this kit's Debian root (./root) under chroot, so the host
# needs only a Linux kernel, /bin/sh and the basic tools every distribution has (coreutils, sed,
# grep): the mount, umount, chroot and sha256sum used here are the kit's own, run through the
# kit's own dynamic loader (a host without util-linux's mount works too). As root it mounts /proc, /sys and /dev
# into the root, binds the directory it was started from (and --out, and any path given on the
# command line) at the same path inside, runs the tool there, and always unmounts again: on exit,
# on Ctrl-C and on SIGTERM/SIGHUP (traps), and a run killed with SIGKILL has its mounts undone by
# the next start. The tool restores THP and huge pages itself; after a SIGKILL of the tool the
# launcher asks it to restore what it left (`doctor --restore-thp`).
set -u

PROG=${0##*/}
KIT=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd -P) || exit 2
ROOT=$KIT/root
PIDFILE=$KIT/.launcher.pid
INSIDE=/opt/mallocsweep # where the tool, the suites and the kit's manifest are in the root
# Inside the root: the tool's venv first; its cache (datasets, built shims) and state (THP restore
# records, the fetched servers a kit carries) stay in the kit, never in the host's home.
ENV_INSIDE="PATH=$INSIDE/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8
MALLOCSWEEP_CACHE=/var/cache/mallocsweep MALLOCSWEEP_STATE=/var/lib/mallocsweep
MALLOCSWEEP_KIT_MANIFEST=$INSIDE/kit.json"

say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
	say "error: $*"
	exit 2
}

usage() {
	cat <<EOF
usage: $0 COMMAND [ARGS...]      (as root)

A self-contained mallocsweep: its own Debian root with Python, the tool, sysbench, every
allocator, the servers chosen at build time and the shipped suites. Nothing is installed on
this host and no network is used. Run directories are written under the directory you start
from (or --out), never inside the kit.

  $0 doctor                 what this host lacks (root, chroot and mounts, /proc, taskstats,
                            cgroups, THP sysfs), then the tool's own checks
  $0 run smoke              a shipped suite by name (see: $0 suites)
  $0 run ./my-suite.toml    or a suite file of yours
  $0 report runs/RUN        (re)write a run's report; compare, merge, allocators, servers list
                            work as in an installed mallocsweep
  $0 suites                 the shipped suites
  $0 verify                 check every file of the kit against its SHA256SUMS
  $0 COMMAND --help         a command's options

The kit's manifest (every component's version and sha256) is $KIT/kit.json; every run made
with the kit records it in its manifest.json ("kit").
EOF
}

# The kit's own binaries, through the kit's loader and libraries (nothing of the host's).
LOADER=$ROOT/lib64/ld-linux-x86-64.so.2
LIBS=$ROOT/lib/x86_64-linux-gnu:$ROOT/usr/lib/x86_64-linux-gnu
kbin() {
	b=$1
	shift
	"$LOADER" --library-path "$LIBS" "$ROOT$b" "$@"
}

# Mount points under the root, in the order the kernel lists them (children after parents).
mounted_under_root() {
	while read -r _id _parent _dev _src mp _rest; do
		case $mp in "$ROOT" | "$ROOT"/*) printf '%s\n' "$mp" ;; esac
	done </proc/self/mountinfo
}

unmount_all() {
	# Deepest first: the listing reversed.
	list=$(mounted_under_root)
	rev=""
	for mp in $list; do rev="$mp $rev"; done
	for mp in $rev; do
		kbin /usr/bin/umount "$mp" 2>/dev/null || kbin /usr/bin/umount -l "$mp" 2>/dev/null
	done
	left=$(mounted_under_root)
	if [ -n "$left" ]; then
		say "error: still mounted under the kit: $(echo $left)"
		return 1
	fi
	return 0
}

# What a path may be bound at inside the root: not the root itself, nor a directory the kit's
# own system lives in (binding the host's /usr over the kit's would run the host's files).
bindable() {
	case $1 in
	/ | /var | /var/lib | /var/cache | /opt) return 1 ;;
	/usr | /usr/* | /etc | /etc/* | /bin | /bin/* | /sbin | /sbin/* | /lib | /lib/* | /lib32* | /lib64* | /libx32*) return 1 ;;
	/proc | /proc/* | /sys | /sys/* | /dev | /dev/* | /run | /run/* | /boot | /boot/*) return 1 ;;
	/opt/mallocsweep | /opt/mallocsweep/* | /var/lib/mallocsweep* | /var/cache/mallocsweep*) return 1 ;;
	"$ROOT" | "$ROOT"/*) return 1 ;;
	esac
	return 0
}

BINDS=""
add_bind() { # a host directory, seen at the same path inside the root
	d=$1
	bindable "$d" || die "$d: cannot be seen inside the kit's root (it is one of the root's own system directories); start from or write to another directory"
	case $d in *[[:space:]]*) die "$d: a path with white space cannot be bound into the kit's root; use another directory" ;; esac
	for b in $BINDS; do [ "$b" = "$d" ] && return 0; done
	BINDS="$BINDS $d"
}

abspath() { # an absolute path for $1 (relative to the current directory), without resolving it
	case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$CWD" "$1" ;; esac
}

mount_all() {
	mkdir -p "$ROOT/proc" "$ROOT/sys" "$ROOT/dev" "$ROOT/tmp" || return 1
	chmod 1777 "$ROOT/tmp"
	# The root bound onto itself, private: inside the chroot / is then a mount point, which a
	# fetched server's own root needs (the exec helper makes / rprivate in the server's mount
	# namespace: EINVAL on a directory that is no mount point), and nothing mounted below it
	# propagates to the host's mounts.
	kbin /usr/bin/mount --bind "$ROOT" "$ROOT" || return 1
	kbin /usr/bin/mount --make-private "$ROOT" || return 1
	kbin /usr/bin/mount -t proc proc "$ROOT/proc" || return 1
	# rbind, then rslave: the host's mounts below /sys and /dev (cgroup, hugetlbfs, /dev/shm)
	# are seen inside, and unmounting them here never propagates back to the host's.
	kbin /usr/bin/mount --rbind /sys "$ROOT/sys" || return 1
	kbin /usr/bin/mount --make-rslave "$ROOT/sys" || return 1
	kbin /usr/bin/mount --rbind /dev "$ROOT/dev" || return 1
	kbin /usr/bin/mount --make-rslave "$ROOT/dev" || return 1
	for d in $BINDS; do
		mkdir -p "$ROOT$d" || return 1
		kbin /usr/bin/mount --bind "$d" "$ROOT$d" || return 1
	done
	return 0
}

CHILD=""
forward() { # a signal the launcher got, passed on to the tool (which stops its servers)
	sig=$1
	# Ctrl-C at a terminal already reached the tool (same process group): pass on only the
	# signals sent to the launcher alone (kill -INT/-TERM PID, a closed SSH session).
	if [ "$sig" = INT ] && [ -t 0 ]; then return; fi
	[ -n "$CHILD" ] && kill "-$sig" "$CHILD" 2>/dev/null
}

cleanup() {
	trap '' INT TERM HUP
	unmount_all || CLEAN_RC=2
	rm -f "$PIDFILE"
}

in_root() { # the tool (or a command) in the root, at the caller's directory. It execs: call it
	# in a subshell (`in_root ... &`, or in parentheses), whose pid is then the tool's own, so a
	# signal passed on reaches the tool, not a shell between (every step below execs too).
	exec "$LOADER" --library-path "$LIBS" "$ROOT/usr/sbin/chroot" "$ROOT" \
		/usr/bin/env -i --default-signal=INT,QUIT $ENV_INSIDE \
		TERM="${TERM:-dumb}" ${COLUMNS:+COLUMNS=$COLUMNS} \
		/bin/sh -c 'cd "$1" || exit 2; shift; exec "$@"' sh "$CWD" "$@"
}

host_checks() { # what this host lacks, one line each; the count is the status
	n=0
	if [ "$(id -u 2>/dev/null || echo 1)" != 0 ]; then
		echo "lacks: root (the kit chroots and mounts: run it with sudo)"
		n=$((n + 1))
	fi
	m=$(uname -m 2>/dev/null)
	[ "$m" = x86_64 ] || {
		echo "lacks: an x86_64 kernel (this is $m; the kit's root is amd64)"
		n=$((n + 1))
	}
	[ -x "$LOADER" ] || {
		echo "lacks: a complete kit ($LOADER is missing: unpack the whole archive)"
		n=$((n + 1))
	}
	[ -r /proc/self/mountinfo ] || {
		echo "lacks: /proc (mounted, with /proc/self/mountinfo)"
		n=$((n + 1))
	}
	[ -r /proc/self/stat ] && [ -r /proc/self/status ] || {
		echo "lacks: /proc/self/stat and /proc/self/status"
		n=$((n + 1))
	}
	[ -r /proc/self/ns/mnt ] || {
		echo "lacks: mount namespaces (/proc/self/ns/mnt: the servers in roots need them)"
		n=$((n + 1))
	}
	[ -d /sys/fs/cgroup ] && [ -r /proc/self/cgroup ] || {
		echo "lacks: cgroups (/sys/fs/cgroup, /proc/self/cgroup)"
		n=$((n + 1))
	}
	if [ -e /sys/kernel/mm/transparent_hugepage/enabled ]; then
		[ -w /sys/kernel/mm/transparent_hugepage/enabled ] || {
			echo "lacks: writable THP sysfs (/sys/kernel/mm/transparent_hugepage/enabled; THP cells need it)"
			n=$((n + 1))
		}
	else
		echo "lacks: THP sysfs (/sys/kernel/mm/transparent_hugepage: a kernel without THP)"
		n=$((n + 1))
	fi
	return $n
}

# -- arguments ------------------------------------------------------------------------------
[ $# -gt 0 ] || {
	usage >&2
	exit 2
}
case $1 in
-h | --help | help)
	usage
	exit 0
	;;
suites)
	for f in "$ROOT$INSIDE"/suites/*.toml; do
		n=${f##*/}
		printf '  %-28s %s\n' "${n%.toml}" "$(sed -n 's/^description *= *"\(.*\)"/\1/p' "$f" | head -n 1)"
	done
	exit 0
	;;
verify)
	cd "$KIT" || exit 2
	if [ -x "$LOADER" ]; then kbin /usr/bin/sha256sum --quiet -c SHA256SUMS; else sha256sum --quiet -c SHA256SUMS; fi
	rc=$?
	[ $rc = 0 ] && echo "$PROG: every component matches $KIT/SHA256SUMS"
	exit $rc
	;;
esac

case $KIT in *[[:space:]]*) die "$KIT: the kit's directory has white space in its path; move it" ;; esac
CWD=$(pwd -P) || die "cannot read the current directory"

LACKING=0
if [ "$1" = doctor ]; then
	found=$(host_checks)
	LACKING=$?
	echo "host checks (the kit's launcher):"
	if [ "$LACKING" = 0 ]; then echo "  nothing lacking"; else printf '%s\n' "$found" | while read -r line; do echo "  $line"; done; fi
	if [ "$(id -u)" != 0 ] || [ ! -x "$LOADER" ]; then exit 2; fi
	echo "the tool's checks (inside the kit's root):"
fi

[ "$(id -u)" = 0 ] || die "the kit runs as root (it chroots into its own root and mounts /proc, /sys, /dev there): sudo $0 $*"
[ -x "$LOADER" ] || die "$LOADER is missing: unpack the whole kit (tar xf FILE) and run it from there"
[ "$(uname -m)" = x86_64 ] || die "this kit is for x86_64; this host is $(uname -m)"

# A suite by name: `run smoke` is the shipped suites/smoke.toml unless ./smoke exists here.
if [ "$1" = run ] && [ $# -ge 2 ]; then
	case $2 in
	-* | */* | *.toml) ;;
	*)
		if [ ! -e "$2" ]; then
			[ -f "$ROOT$INSIDE/suites/$2.toml" ] || die "no suite $2: neither a file here nor a shipped suite (see: $0 suites)"
			name=$2
			shift 2
			set -- run "$INSIDE/suites/$name.toml" "$@"
		fi
		;;
	esac
fi

# What the tool reads or writes on the host is bound into the root at the same path: the
# directory it was started from, --out's directory (created, as `run` would), and every
# argument naming an existing file or directory elsewhere.
add_bind "$CWD"
prev=""
for a in "$@"; do
	out=""
	case $prev in --out | -o) out=$a ;; esac
	case $a in --out=*) out=${a#--out=} ;; esac
	if [ -n "$out" ]; then
		p=$(abspath "$out")
		mkdir -p "$p" || die "--out $out: cannot create it"
		p=$(cd "$p" && pwd -P) || die "--out $out: cannot read it"
		case $p in "$CWD" | "$CWD"/*) ;; *) add_bind "$p" ;; esac
	elif [ -n "$a" ] && [ "${a#-}" = "$a" ] && [ -e "$a" ]; then
		p=$(abspath "$a")
		[ -d "$p" ] || p=$(dirname -- "$p")
		p=$(cd "$p" && pwd -P) || die "$a: cannot read its directory"
		case $p in "$CWD" | "$CWD"/*) ;; *) add_bind "$p" ;; esac
	fi
	prev=$a
done

# One launcher per kit at a time; a pid file of one that is gone means its mounts are stale.
if [ -f "$PIDFILE" ]; then
	old=$(cat "$PIDFILE" 2>/dev/null)
	if [ -n "$old" ] && [ "$old" != $$ ] && kill -0 "$old" 2>/dev/null &&
		grep -q mallocsweep "/proc/$old/cmdline" 2>/dev/null; then
		die "another run of this kit is active (pid $old); wait for it or stop it"
	fi
fi
# A tool whose launcher was killed (SIGKILL) may still run in the root: its mounts are in use.
for p in /proc/[0-9]*; do
	[ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] &&
		die "a process of an earlier run still runs in the kit's root (pid ${p#/proc/}): wait for it to end, or stop it (kill ${p#/proc/})"
done
stale=$(mounted_under_root)
if [ -n "$stale" ]; then
	say "undoing the mounts a killed earlier run left: $(echo $stale)"
	unmount_all || exit 2
fi
echo $$ >"$PIDFILE" || die "$PIDFILE: cannot write it (is the kit's directory writable?)"

CLEAN_RC=0
trap 'cleanup' EXIT
trap 'forward INT' INT
trap 'forward TERM' TERM
trap 'forward HUP' HUP

mount_all || {
	say "error: cannot mount /proc, /sys, /dev or a bind into $ROOT (see above); nothing is left mounted"
	exit 2
}

in_root mallocsweep "$@" &
CHILD=$!
# wait returns early (status > 128) when a trapped signal arrives; wait again until the tool is
# gone, so the mounts outlive it.
while :; do
	wait "$CHILD"
	rc=$?
	[ "$rc" -gt 128 ] && kill -0 "$CHILD" 2>/dev/null || break
done
CHILD=""
if [ "$rc" = 137 ]; then
	say "the tool was killed (SIGKILL); restoring what it changed (THP, huge pages)"
	(in_root mallocsweep doctor --restore-thp) >/dev/null 2>&1 || say "restore failed: run $0 doctor --restore-thp"
fi
cleanup
trap - EXIT
[ "$CLEAN_RC" = 0 ] || exit "$CLEAN_RC"
# doctor: a host that lacks something is not ready, whatever the tool's own checks said
[ "$LACKING" = 0 ] || [ "$rc" != 0 ] || rc=2
exit "$rc"
