# Shared by scripts/demo and scripts/test: installs the Debian packages vault needs.
# Sourced, not run.

# What building needs (the C libraries behind the system-library targets; libtss2-dev for the
# TPM's headers, its libraries being loaded at run time).
# libcairo2-dev for the recovery kits' PDF pages (CCairo), with fonts-dejavu-core for their text.
BUILD_PACKAGES=(pkg-config libsodium-dev libssl-dev libqrencode-dev libzbar-dev libsqlite3-dev libpng-dev libjpeg62-turbo-dev libisal-dev
                libtss2-dev libcairo2-dev fonts-dejavu-core)
# What the tests use besides: zbarimg and cjpeg as independent decoders and encoders, and
# Debian's Python with PyNaCl and cryptography (AES-GCM) for an independent implementation
# of the bundle format;
# avahi (with a private D-Bus) as a second independent mDNS stack, run only inside the
# tests' own network namespaces; xdg-utils to check the vault:// desktop handler; and to check
# what scripts/install installs: man-db (man -l), zsh and fish (their -n), systemd
# (systemd-analyze verify) and desktop-file-utils (desktop-file-validate); postgresql, for
# the relay tests' throwaway clusters (PostgresCluster; Debian's own cluster is not used);
# openssl, for the relay TLS test's own certificate authority; and chromium, the real
# browser that opens share links in the link page tests (Tests/Interop/browser.py); swtpm,
# the software TPM the TPM tests start (SoftwareTPM), and tpm2-tools to change it under them
# (PCRs, dictionary-attack parameters) and to read what a test needs; binutils for readelf;
# poppler-utils (pdftoppm, pdftotext) to render the recovery kits as a printer would and read
# their text back.
TEST_PACKAGES=(zbar-tools libjpeg-turbo-progs python3 python3-nacl python3-cryptography python3-venv iproute2
               avahi-daemon avahi-utils dbus-daemon util-linux xdg-utils
               man-db zsh fish systemd desktop-file-utils postgresql openssl chromium swtpm tpm2-tools binutils
               poppler-utils)
# Independent peers from PyPI, in a virtualenv (Debian's Python refuses system-wide pip);
# shamir-mnemonic is Trezor's reference SLIP-39 (its library and its `shamir` command, which
# needs click).
TEST_PYPI=(noiseprotocol==0.3.1 zeroconf==0.154.0 shamir-mnemonic==0.3.0 click==8.1.8)

if [ -t 2 ] && [ -z "${NO_COLOR:-}" ]; then
  say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
else
  say() { printf '==> %s\n' "$*" >&2; }
fi

# ensure_packages NAME... installs whichever are missing, running apt-get update once.
ensure_packages() {
  local missing=() package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "vault: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  say "installing ${missing[*]}"
  # Packages are installed without starting their services (avahi-daemon would otherwise
  # announce this host on its real network): a policy-rc.d that denies every start, for the
  # length of the install, unless the machine already has one (Docker images do).
  local policy=/usr/sbin/policy-rc.d added=
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# written by vault scripts/lib/common.sh during apt-get install\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"
    added=1
  fi
  local status=0
  "${sudo[@]}" apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || status=$?
  [ -n "$added" ] && "${sudo[@]}" rm -f "$policy"
  [ "$status" -eq 0 ] || { echo "vault: apt-get could not install: ${missing[*]}" >&2; exit 1; }
}

# ensure_venv: .build-venv/ with TEST_PYPI, made once (it is ignored by git).
ensure_venv() {
  # Every package is imported, so a venv made before one was added is made anew.
  if ! .build-venv/bin/python -c 'import noise, zeroconf, shamir_mnemonic, click' 2>/dev/null; then
    say "installing ${TEST_PYPI[*]} into .build-venv"
    rm -rf .build-venv
    /usr/bin/python3 -m venv .build-venv
    .build-venv/bin/pip install --quiet --disable-pip-version-check "${TEST_PYPI[@]}"
  fi
}

# require_swift: what builds needs the toolchain; installing a given binary does not.
require_swift() {
  command -v swift >/dev/null || { echo "vault: the Swift toolchain is not on PATH" >&2; exit 1; }
}
