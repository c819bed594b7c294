#!/usr/bin/env bash
# Separate "hosts" on one Linux machine, for multi-host Horovod runs and tests.
#
#   scripts/testhosts.sh up [N]          N hosts (default 2): network namespaces with sshd
#   scripts/testhosts.sh down            remove everything `up` made (idempotent)
#   scripts/testhosts.sh status          show the hosts; exit 1 unless all answer over ssh
#   scripts/testhosts.sh env             shell exports for horovodrun (eval "$(... env)")
#   scripts/testhosts.sh exec HOST CMD…  run CMD on HOST (name rlgen-h1, h1, 1 or its address)
#   scripts/testhosts.sh link HOST up|down   bring HOST's link up or down (cable pulled)
#   scripts/testhosts.sh hide HOST PATH  make PATH look empty on HOST for new ssh sessions
#                                        (e.g. the venv: a host without the project installed)
#   scripts/testhosts.sh unhide HOST PATH    show PATH on HOST again
#
# Each host is a network namespace <prefix>-hI with an interface named <prefix>0 that
# holds <subnet>.(10+I)/24, joined by a veth pair to the bridge <prefix>0 in the root
# namespace, which holds <subnet>.1 (the launching host). The interface has the same name
# (<prefix>0) on every host and on the launcher, which is what horovodrun needs: it takes
# one interface name (--network-interface) and uses it on every machine. Each host runs
# its own sshd (root login by a key made for these hosts only), listening only on its
# address, in its own UTS namespace with the hostname <prefix>-hI. The namespaces share
# the filesystem, so the same venv path works on every host.
#
# Nothing outside the state directory, the namespaces, the bridge and the veths is changed,
# except: openssh-server is installed with apt-get if sshd or ssh is missing (with a
# temporary /usr/sbin/policy-rc.d, where there is none, so that no ssh service starts), and
# /run/sshd (sshd's privilege-separation directory, normally made by the package's service)
# is created if missing. ~/.ssh is not touched: ssh reaches the hosts through <state>/ssh_config, which
# <state>/bin/ssh (put first on PATH by `env`) adds for these hosts only.
#
# Environment (all optional):
#   RLGEN_TESTHOSTS_PREFIX  name prefix of namespaces, bridge and veths (default rlgen)
#   RLGEN_TESTHOSTS_SUBNET  first three octets of the private /24 (default 192.168.213)
#   RLGEN_TESTHOSTS_STATE   state directory (default ${XDG_RUNTIME_DIR:-/tmp}/<prefix>-testhosts)
#   RLGEN_TESTHOSTS_SSHD    the sshd binary to use (default: sshd on PATH or in /usr/sbin)
#
# Exit status: 0 ok, 1 failure, 2 usage, 77 this machine cannot host them (not root, no
# network namespaces, no sshd and apt-get could not install it) — tests skip on 77.
set -euo pipefail

PREFIX="${RLGEN_TESTHOSTS_PREFIX:-rlgen}"
# Above 127.x on purpose: Gloo connects from the higher address to the lower one, so a rank
# that wrongly binds to 127.0.0.1 fails here instead of working by luck (docs/notes/cluster-notes.md).
SUBNET="${RLGEN_TESTHOSTS_SUBNET:-192.168.213}"
STATE="${RLGEN_TESTHOSTS_STATE:-${XDG_RUNTIME_DIR:-/tmp}/$PREFIX-testhosts}"
BRIDGE="${PREFIX}0"       # the bridge here, and each host's interface: one name everywhere
LAUNCHER_IP="$SUBNET.1"
MARK=".rlgen-testhosts"   # marks a state directory as ours (down removes only such a directory)
MAX_HOSTS=50

log() { printf '[testhosts] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
unavailable() { log "unavailable: $*"; exit 77; }

[[ "$PREFIX" =~ ^[a-z][a-z0-9]{0,9}$ ]] \
  || { log "RLGEN_TESTHOSTS_PREFIX must be 1-10 lower-case letters/digits, starting with a letter"; exit 2; }
[[ "$SUBNET" =~ ^(10|172|192)\.[0-9]{1,3}\.[0-9]{1,3}$ ]] \
  || { log "RLGEN_TESTHOSTS_SUBNET must be the first three octets of a private /24, e.g. 192.168.213"; exit 2; }
[[ "$STATE" = /* && "$STATE" != *[[:space:]]* ]] \
  || { log "RLGEN_TESTHOSTS_STATE must be an absolute path without spaces"; exit 2; }

ns_name() { printf '%s-h%s' "$PREFIX" "$1"; }   # also the name of its veth end in the root namespace
ns_ip() { printf '%s.%s' "$SUBNET" "$((10 + $1))"; }
sshd_pid() { local f; f="$STATE/$(ns_name "$1")/sshd.pid"; [ -s "$f" ] && cat "$f"; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# Namespaces of this prefix that exist now, by index (from `ip netns`, not from the state).
existing_indices() {
  ip netns list 2>/dev/null | awk '{print $1}' | sed -n "s/^$PREFIX-h\([0-9]\{1,2\}\)\$/\1/p" | sort -n
}
state_indices() { [ -f "$STATE/hosts" ] && awk '{print $1}' "$STATE/hosts"; }

# HOST given as rlgen-h1, h1, 1 or its address (192.168.213.11) -> index
host_index() {
  local h="$1" i
  case "$h" in
    "$PREFIX"-h*) i="${h#"$PREFIX"-h}" ;;
    h*) i="${h#h}" ;;
    "$SUBNET".*) i=$(( ${h##*.} - 10 )) ;;
    *) i="$h" ;;
  esac
  if ! [[ "$i" =~ ^[0-9]+$ ]] || [ "$i" -lt 1 ] || [ "$i" -gt "$MAX_HOSTS" ]; then die "unknown host '$h'"; fi
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$(ns_name "$i")" || die "host $(ns_name "$i") is not up"
  printf '%s' "$i"
}

# --- down --------------------------------------------------------------------------------

# End every process in namespace $1 (sshd and whatever ran under it): TERM, then KILL; bounded.
kill_ns_procs() {
  local ns="$1" try sig
  local -a pids
  for try in 1 2 3 4 5 6 7 8 9 10; do
    mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null)
    [ "${#pids[@]}" -gt 0 ] || return 0
    sig=TERM; [ "$try" -le 6 ] || sig=KILL
    kill -"$sig" "${pids[@]}" 2>/dev/null || true
    sleep 0.3
  done
  mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null)
  [ "${#pids[@]}" -eq 0 ] || log "warning: processes still in $ns: ${pids[*]}"
}

do_down() {
  local i ns pid
  # sshd daemons first (recorded pids; they live in the namespaces, so kill_ns_procs finds them too)
  for i in $( { state_indices; existing_indices; } 2>/dev/null | sort -nu); do
    ns="$(ns_name "$i")"
    pid="$(sshd_pid "$i" 2>/dev/null || true)"
    if alive "$pid" && ip netns identify "$pid" 2>/dev/null | grep -qx "$ns"; then kill -TERM "$pid" 2>/dev/null || true; fi
    if ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$ns"; then
      kill_ns_procs "$ns"
      timeout 10 ip netns del "$ns" 2>/dev/null || log "warning: could not delete namespace $ns"
      log "removed host $ns"
    fi
    # deleting the namespace destroys the veth pair; remove a leftover root end all the same
    if ip link show "$ns" >/dev/null 2>&1; then ip link del "$ns" 2>/dev/null || true; fi
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link del "$BRIDGE" 2>/dev/null && log "removed bridge $BRIDGE"
  fi
  if [ -d "$STATE" ]; then
    if [ -f "$STATE/$MARK" ] || [ -z "$(ls -A "$STATE")" ]; then
      rm -rf -- "$STATE"
    else
      log "warning: $STATE is not a testhosts state directory; left alone"
    fi
  fi
}

# --- up ----------------------------------------------------------------------------------

need_root_and_netns() {
  [ "$(uname -s)" = Linux ] || unavailable "network namespaces need Linux"
  [ "$(id -u)" -eq 0 ] || unavailable "network namespaces need root (running as uid $(id -u))"
  for cmd in ip unshare nsenter timeout; do
    command -v "$cmd" >/dev/null 2>&1 || unavailable "'$cmd' is not installed"
  done
  ip netns list >/dev/null 2>&1 || unavailable "'ip netns' does not work here"
  local probe="$PREFIX-probe$$"
  if ! ip netns add "$probe" 2>/dev/null; then unavailable "'ip netns add' fails (no CAP_SYS_ADMIN?)"; fi
  ip netns del "$probe" 2>/dev/null || true
}

find_sshd() {
  local s
  if [ -n "${RLGEN_TESTHOSTS_SSHD:-}" ]; then
    [ -x "$RLGEN_TESTHOSTS_SSHD" ] && { printf '%s' "$RLGEN_TESTHOSTS_SSHD"; return 0; }
    return 1
  fi
  for s in "$(command -v sshd 2>/dev/null || true)" /usr/sbin/sshd /usr/local/sbin/sshd; do
    [ -n "$s" ] && [ -x "$s" ] && { printf '%s' "$s"; return 0; }
  done
  return 1
}

# Install openssh-server (which brings the client) with apt-get when sshd, ssh or ssh-keygen
# is missing. The server is only used as a binary: no system service is started (a temporary
# policy-rc.d forbids it where the machine has none).
ensure_sshd() {
  if SSHD="$(find_sshd)" && command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1; then
    return 0
  fi
  command -v apt-get >/dev/null 2>&1 || unavailable "sshd or ssh is not installed and there is no apt-get to install it"
  log "sshd or ssh is missing: installing Debian's openssh-server with apt-get (non-interactive; no service is started)"
  local policy=/usr/sbin/policy-rc.d made_policy=0 rc=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# rlgen testhosts: temporary, removed after apt-get\nexit 101\n' >"$policy"
    chmod 755 "$policy"; made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  local apt=(timeout 180 apt-get -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
  "${apt[@]}" install --no-install-recommends openssh-server >&2 \
    || { log "apt-get install failed; running apt-get update and trying again"; \
         timeout 180 apt-get -q update >&2 && "${apt[@]}" install --no-install-recommends openssh-server >&2; } \
    || rc=$?
  [ "$made_policy" -eq 0 ] || rm -f "$policy"
  [ "$rc" -eq 0 ] || unavailable "sshd is not installed and 'apt-get install openssh-server' failed (status $rc)"
  if ! { SSHD="$(find_sshd)" && command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1; }; then
    unavailable "openssh-server installed but sshd, ssh or ssh-keygen is still missing"
  fi
}

check_subnet_free() {
  # any route to our addresses other than the default route means the /24 is taken here
  local routes
  routes="$(ip -4 route show match "$(ns_ip 1)" 2>/dev/null | grep -v '^default' || true)"
  [ -z "$routes" ] || die "subnet $SUBNET.0/24 is already routed here ($routes); set RLGEN_TESTHOSTS_SUBNET"
}

write_sshd_config() {  # index
  local i="$1" ns dir
  ns="$(ns_name "$i")"; dir="$STATE/$ns"
  cat >"$dir/sshd_config" <<EOF
# sshd for test host $ns (made by scripts/testhosts.sh; removed by 'down')
ListenAddress $(ns_ip "$i"):22
HostKey $dir/ssh_host_ed25519_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $STATE/authorized_keys
# root by the test key only
PermitRootLogin prohibit-password
AllowUsers root
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
UsePAM no
# the state directory may live under /tmp (world-writable), which StrictModes refuses
StrictModes no
PermitUserEnvironment no
AllowAgentForwarding no
AllowTcpForwarding no
X11Forwarding no
PrintMotd no
# horovodrun opens several sessions per host at once
MaxStartups 100:30:200
MaxSessions 100
LoginGraceTime 20
ClientAliveInterval 5
ClientAliveCountMax 3
EOF
}

# /etc/hosts as host $1 sees it: its own name and every other host's, plus the launcher
write_hosts_file() {  # index, all indices...
  local me="$1" i; shift
  {
    echo "# /etc/hosts of test host $(ns_name "$me") (scripts/testhosts.sh)"
    echo "127.0.0.1 localhost"
    echo "$LAUNCHER_IP $PREFIX-launcher"
    for i in "$@"; do echo "$(ns_ip "$i") $(ns_name "$i")"; done
  } >"$STATE/$(ns_name "$me")/hosts"
}

write_ssh_config() {  # indices...
  local i ns
  {
    echo "# ssh client config for the rlgen test hosts (scripts/testhosts.sh); use: ssh -F $STATE/ssh_config HOST"
    for i in "$@"; do
      ns="$(ns_name "$i")"
      cat <<EOF
Host $ns $(ns_ip "$i")
  HostName $(ns_ip "$i")
  HostKeyAlias $ns
EOF
    done
    cat <<EOF
Host *
  User root
  Port 22
  IdentityFile $STATE/id_ed25519
  IdentitiesOnly yes
  BatchMode yes
  UserKnownHostsFile $STATE/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  ConnectTimeout 5
  ServerAliveInterval 5
  ServerAliveCountMax 3
  LogLevel ERROR
EOF
  } >"$STATE/ssh_config"
}

# <state>/bin/ssh: horovodrun runs plain `ssh` (no -F option); this wrapper adds our config
# when one of the arguments is one of our hosts, and is plain ssh otherwise.
write_ssh_wrapper() {  # indices...
  local real i names=""
  real="$(command -v ssh)"
  for i in "$@"; do names="$names $(ns_name "$i") $(ns_ip "$i")"; done
  mkdir -p "$STATE/bin"
  cat >"$STATE/bin/ssh" <<EOF
#!/bin/sh
# ssh for the rlgen test hosts (scripts/testhosts.sh): adds -F $STATE/ssh_config for them.
for a in "\$@"; do
  for h in$names; do
    [ "\$a" = "\$h" ] && exec $real -F $STATE/ssh_config "\$@"
  done
done
exec $real "\$@"
EOF
  chmod 755 "$STATE/bin/ssh"
}

start_sshd() {  # index
  local i="$1" ns dir try
  ns="$(ns_name "$i")"; dir="$STATE/$ns"
  # Own UTS namespace: sessions see the hostname $ns. `ip netns exec` gives a private mount
  # namespace (mounts do not propagate back), in which $dir/hosts is bound over /etc/hosts so
  # that every host name resolves to its address there, as on a real cluster. Horovod 0.28.1's
  # Gloo needs that: it binds its collectives to the address of gethostname() (see
  # docs/notes/cluster-notes.md), whatever --network-interface says.
  # shellcheck disable=SC2016  # $1.. expand in the inner sh
  ip netns exec "$ns" unshare --uts -- sh -c \
    'hostname "$1" && mount --bind "$2" /etc/hosts && exec "$3" -f "$4" -E "$5"' \
    sh "$ns" "$dir/hosts" "$SSHD" "$dir/sshd_config" "$dir/sshd.log" \
    || die "sshd for $ns did not start: $(tail -n 3 "$dir/sshd.log" 2>/dev/null)"
  for try in $(seq 1 50); do
    alive "$(sshd_pid "$i" || true)" && return 0
    sleep 0.1
  done
  die "sshd for $ns wrote no pid within 5 s: $(tail -n 3 "$dir/sshd.log" 2>/dev/null)"
}

wait_ssh() {  # index
  local i="$1" ns try
  ns="$(ns_name "$i")"
  for try in $(seq 1 20); do
    if timeout 10 ssh -F "$STATE/ssh_config" -o ConnectTimeout=2 "$ns" true 2>/dev/null; then return 0; fi
    sleep 0.25
  done
  die "ssh to $ns ($(ns_ip "$i")) does not work: $(timeout 10 ssh -F "$STATE/ssh_config" "$ns" true 2>&1 | tail -n 2)"
}

do_up() {
  local n="${1:-2}" i ns ip_
  local -a idx
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt "$MAX_HOSTS" ]; then log "up: N must be 1..$MAX_HOSTS"; exit 2; fi
  need_root_and_netns
  lock
  if [ -n "$(existing_indices)" ] || ip link show "$BRIDGE" >/dev/null 2>&1 || [ -f "$STATE/$MARK" ]; then
    log "removing a previous setup with prefix $PREFIX first"
    do_down
  fi
  if [ -d "$STATE" ] && [ -n "$(ls -A "$STATE")" ] && [ ! -f "$STATE/$MARK" ]; then
    die "state directory $STATE exists, is not empty and is not ours; set RLGEN_TESTHOSTS_STATE"
  fi
  check_subnet_free
  ensure_sshd

  # from here on, a failure removes whatever was made
  trap 'rc=$?; if [ $rc -ne 0 ]; then log "up failed (status $rc); removing what was made"; do_down; fi' EXIT
  trap 'exit 130' INT TERM
  mkdir -p "$STATE"; chmod 700 "$STATE"; touch "$STATE/$MARK"
  [ -d /run/sshd ] || { mkdir -p /run/sshd; chmod 755 /run/sshd; }
  ssh-keygen -q -t ed25519 -N '' -C "rlgen-testhosts" -f "$STATE/id_ed25519"
  cp "$STATE/id_ed25519.pub" "$STATE/authorized_keys"
  : >"$STATE/known_hosts"; : >"$STATE/hosts"

  ip link add "$BRIDGE" type bridge
  [ ! -w "/proc/sys/net/ipv6/conf/$BRIDGE/disable_ipv6" ] || echo 1 >"/proc/sys/net/ipv6/conf/$BRIDGE/disable_ipv6"
  ip addr add "$LAUNCHER_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up

  for i in $(seq 1 "$n"); do
    ns="$(ns_name "$i")"; ip_="$(ns_ip "$i")"
    ip netns add "$ns"
    ip link add "$ns" type veth peer name "$BRIDGE" netns "$ns"
    ip link set "$ns" master "$BRIDGE"
    ip link set "$ns" up
    # shellcheck disable=SC2016  # $1, $2 expand in the inner sh
    ip netns exec "$ns" sh -c '
      [ ! -w /proc/sys/net/ipv6/conf/all/disable_ipv6 ] || echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6
      ip link set lo up && ip addr add "$1/24" dev "$2" && ip link set "$2" up' sh "$ip_" "$BRIDGE"
    mkdir -p "$STATE/$ns"
    ssh-keygen -q -t ed25519 -N '' -C "$ns" -f "$STATE/$ns/ssh_host_ed25519_key"
    printf '%s %s\n' "$ns" "$(cut -d' ' -f1-2 "$STATE/$ns/ssh_host_ed25519_key.pub")" >>"$STATE/known_hosts"
    printf '%s %s %s\n' "$i" "$ns" "$ip_" >>"$STATE/hosts"
    write_sshd_config "$i"
  done
  mapfile -t idx < <(state_indices)
  for i in "${idx[@]}"; do write_hosts_file "$i" "${idx[@]}"; done
  write_ssh_config "${idx[@]}"
  write_ssh_wrapper "${idx[@]}"
  for i in "${idx[@]}"; do start_sshd "$i"; done
  for i in "${idx[@]}"; do wait_ssh "$i"; done
  # host to host, across the bridge (a bridge netfilter rule could block it)
  if [ "$n" -ge 2 ]; then
    timeout 10 ip netns exec "$(ns_name 1)" timeout 5 bash -c "exec 3<>/dev/tcp/$(ns_ip 2)/22" 2>/dev/null \
      || die "$(ns_name 1) cannot reach $(ns_name 2) across bridge $BRIDGE (a firewall on bridged traffic?)"
  fi
  trap - EXIT INT TERM
  log "$n host(s) up: $(awk '{printf "%s=%s ", $2, $3}' "$STATE/hosts")launcher=$LAUNCHER_IP interface=$BRIDGE"
  log "try: eval \"\$($0 env)\"; ssh \$RLGEN_TESTHOSTS_NAME1 hostname"
}

# --- status, env, exec, link, hide -------------------------------------------------------

do_status() {
  local ok=0 i ns pid reach link
  if [ ! -f "$STATE/hosts" ]; then
    [ -z "$(existing_indices)" ] || { log "namespaces $(existing_indices | sed "s/^/$PREFIX-h/" | tr '\n' ' ')exist without state $STATE (run down)"; return 1; }
    echo "no test hosts (prefix $PREFIX, state $STATE)"; return 1
  fi
  echo "launcher $LAUNCHER_IP on $BRIDGE; state $STATE"
  while read -r i ns ip_; do
    pid="$(sshd_pid "$i" || true)"
    reach=no
    timeout 10 ssh -n -F "$STATE/ssh_config" -o ConnectTimeout=3 "$ns" true 2>/dev/null && reach=yes
    link="$(ip -br link show "$ns" 2>/dev/null | awk '{print $2}')"
    printf '%s %s link %s sshd %s ssh %s\n' "$ns" "$ip_" "${link:-missing}" \
      "$(alive "$pid" && echo "pid $pid" || echo dead)" "$reach"
    [ "$reach" = yes ] || ok=1
  done <"$STATE/hosts"
  return "$ok"
}

do_env() {
  [ -f "$STATE/hosts" ] || die "no test hosts are up (state $STATE); run: $0 up"
  local names addrs slots k=0 i ns ip_
  names=""; addrs=""; slots=""
  while read -r i ns ip_; do
    k=$((k + 1))
    names="$names${names:+ }$ns"; addrs="$addrs${addrs:+ }$ip_"; slots="$slots${slots:+,}$ip_:1"
    printf 'export RLGEN_TESTHOSTS_NAME%s=%s RLGEN_TESTHOSTS_ADDR%s=%s\n' "$k" "$ns" "$k" "$ip_"
  done <"$STATE/hosts"
  cat <<EOF
export RLGEN_TESTHOSTS_STATE='$STATE'
export RLGEN_TESTHOSTS_NAMES='$names'
export RLGEN_TESTHOSTS_ADDRS='$addrs'
# horovodrun -H value (one slot each; edit the :1 for more)
export RLGEN_TESTHOSTS_HOSTS='$slots'
# the launching host's address on the bridge (where the rendezvous server is reached)
export RLGEN_TESTHOSTS_LAUNCHER='$LAUNCHER_IP'
# horovodrun --network-interface value: the same name on the launcher and every host
export RLGEN_TESTHOSTS_IFACE='$BRIDGE'
export RLGEN_TESTHOSTS_SSH_CONFIG='$STATE/ssh_config'
export RLGEN_TESTHOSTS_SSH_KEY='$STATE/id_ed25519'
# ssh wrapper that adds the ssh config for these hosts only (horovodrun runs plain ssh)
case ":\$PATH:" in *":$STATE/bin:"*) ;; *) export PATH='$STATE/bin':"\$PATH" ;; esac
EOF
}

do_exec() {
  [ $# -ge 2 ] || { log "usage: $0 exec HOST CMD..."; exit 2; }
  local i pid
  i="$(host_index "$1")"; shift
  pid="$(sshd_pid "$i" 2>/dev/null || true)"
  if alive "$pid"; then
    # the namespaces sshd's sessions see: network, hostname, mounts (see `hide`)
    exec nsenter --target "$pid" --net --uts --mount -- "$@"
  fi
  exec ip netns exec "$(ns_name "$i")" "$@"
}

do_link() {
  if [ $# -ne 2 ] || { [ "$2" != up ] && [ "$2" != down ]; }; then log "usage: $0 link HOST up|down"; exit 2; fi
  local i
  lock
  i="$(host_index "$1")"
  ip link set "$(ns_name "$i")" "$2"
  log "link of $(ns_name "$i") is $2"
}

do_hide() {
  [ $# -eq 2 ] || { log "usage: $0 hide HOST PATH"; exit 2; }
  local i pid
  lock
  i="$(host_index "$1")"
  pid="$(sshd_pid "$i" 2>/dev/null || true)"
  alive "$pid" || die "sshd of $(ns_name "$i") is not running"
  [ -d "$2" ] || die "$2 is not a directory"
  # an empty read-only tmpfs over PATH in the mount namespace of the host's sshd: sessions
  # opened from now on do not see what is there (the rest of the machine still does)
  nsenter --target "$pid" --mount -- mount -t tmpfs -o ro,size=4k rlgen-hidden "$2"
  log "$2 now looks empty on $(ns_name "$i") (undone by down)"
}

do_unhide() {
  [ $# -eq 2 ] || { log "usage: $0 unhide HOST PATH"; exit 2; }
  local i pid
  lock
  i="$(host_index "$1")"
  pid="$(sshd_pid "$i" 2>/dev/null || true)"
  alive "$pid" || die "sshd of $(ns_name "$i") is not running"
  nsenter --target "$pid" --mount -- umount "$2" || die "$2 is not hidden on $(ns_name "$i")"
  log "$2 is visible again on $(ns_name "$i")"
}

# One change at a time per prefix (two `up`s at once would tear down each other's hosts).
# The (empty) lock file ${TMPDIR:-/tmp}/<prefix>-testhosts.lock is kept.
lock() {
  command -v flock >/dev/null 2>&1 || return 0
  exec 9>"${TMPDIR:-/tmp}/$PREFIX-testhosts.lock"
  flock -w 300 9 || die "another testhosts command for prefix $PREFIX holds the lock"
}

cmd="${1:-}"
[ $# -eq 0 ] || shift
case "$cmd" in
  up) [ $# -le 1 ] || { log "usage: $0 up [N]"; exit 2; }; do_up "${1:-2}" ;;
  down)
    [ "$(id -u)" -eq 0 ] || { log "down needs root"; exit 1; }
    lock; do_down; log "down: nothing of prefix $PREFIX is left" ;;
  status) do_status ;;
  env) do_env ;;
  exec) do_exec "$@" ;;
  link) do_link "$@" ;;
  hide) do_hide "$@" ;;
  unhide) do_unhide "$@" ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
