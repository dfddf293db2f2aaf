#!/usr/bin/env bash
# zerodp's Debian build and test dependencies for a machine that has no network and no apt: the GPU
# machine a session is lent (scripts/gpu/gpu-check.sh), whose image has a compiler, CMake, CUDA and
# Python but no Open MPI, OpenBLAS, fmt, spdlog, GoogleTest, ...
#
#   bash scripts/gpu/gpu-deps.sh fetch [DIR]             here, with network: the .deb files into DIR
#                                                    [.gpudeps], DIR/MANIFEST (package=version)
#   bash scripts/gpu/gpu-deps.sh install [DIR] [PREFIX]  there: unpacks DIR's .deb files into PREFIX
#                                                    [/opt/zerodp-deps], writes PREFIX/env.sh
#   source <(bash scripts/gpu/gpu-deps.sh env [DIR] [PREFIX])   install (if not yet), then print env.sh
#
# Why each step:
# - The packages are unpacked with `dpkg -x` into PREFIX, never into /: installing into the image's
#   own /usr could break it, and dpkg -x needs no dependency resolution or maintainer scripts.
# - Only what zerodp's build and tests use travels (the working tree that reaches the machine is at
#   most 64 MiB, and this folder travels in it): packages of the image's base system and compiler
#   (libc, libstdc++, libgomp, zlib, ...) are left out, and must be, so that nothing the image runs
#   on is replaced; so are Open MPI's network transports (UCX, libfabric, verbs, PSM), which one host
#   does not need (their plugins are removed at install, so Open MPI never tries to load them).
# - A few libraries the image may or may not have (libgfortran5 for OpenBLAS, libudev1 for hwloc)
#   travel as fallbacks: unpacked only when the system has no library of that soname, so that an
#   older copy of ours never shadows the image's own through LD_LIBRARY_PATH.
# - What dpkg -x does not do is redone inside PREFIX: absolute symlinks are re-pointed into PREFIX,
#   and the update-alternatives links the maintainer scripts would make (mpirun, mpicc, the OpenMP
#   OpenBLAS as libopenblas.so.0 / libblas.so.3, cblas.h, ...) are made from those scripts' own lines.
# - env.sh relocates what needs it: Open MPI 4.1 finds its plugins, help files and wrapper data under
#   OPAL_PREFIX, its settings and default hostfile (Debian: /etc/openmpi) under OPAL_SYSCONFDIR;
#   PMIx (libpmix2, its own prefix .../pmix2) under PMIX_PREFIX and the PMIX_*DIR variables.
#
# Environment: GPU_DEPS_BUDGET_MIB [48]  fetch fails when the .deb files together are larger.
#   GPU_DEPS_FORCE_FALLBACK=1  install unpacks the fallback packages even where the system has their
#                              libraries (to test, on a machine that has them, what the GPU machine gets).
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
ARCH_TRIPLET=x86_64-linux-gnu

die() { printf 'gpu-deps: %s\n' "$*" >&2; exit 1; }
log() { printf 'gpu-deps: %s\n' "$*" >&2; }

# ---- what zerodp needs (CMakeLists.txt, tests/, bench/) -----------------------------------------
# Required by find_package / find_library there. Left out on purpose: libdnnl-dev (oneDNN, optional,
# ZERODP_ONEDNN=AUTO) and oneMKL (optional, ZERODP_NO_MKL=1 semantics on the GPU machine).
ROOTS=(
  libopenmpi-dev openmpi-bin                      # find_package(MPI), mpirun for the multi-rank tests
  libopenblas-dev libopenblas-openmp-dev          # OpenBLAS, the OpenMP build (CMakeLists.txt says why)
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev                       # tests/
  libbenchmark-dev                                # bench/ (ZERODP_BUILD_BENCH=ON)
  liburing-dev                                    # the NVMe offload files' I/O
  libpcre2-dev                                    # the tokenizers' pre-tokenization regexes
)
# Installed only where the system lacks their sonames (see the header).
FALLBACK=(libgfortran5 libudev1)

# left_out PKG: prints why PKG does not travel, or fails (status 1) when it does. A dependency group
# ("a | b") with any left-out member counts as satisfied: by the base system, or not needed.
left_out() {
  case $1 in
    # The image's base system and compiler: present there, and must not be shadowed or replaced.
    libc6 | libc6-dev | libc-dev | libc-dev-bin | linux-libc-dev | libcrypt1 | libcrypt-dev | \
    libgcc-s1 | gcc-[0-9]*-base | libstdc++6 | libgomp1 | libquadmath0 | libatomic1 | zlib1g | \
    gcc | gcc-[0-9]* | g++* | cpp* | binutils* | perl | perl-base | perl-modules-* | python3* | \
    dpkg | debconf | adduser | debianutils | tar)
      echo "base system or compiler" ;;
    # Open MPI's Fortran bindings are all that needs a Fortran compiler; zerodp is C++.
    gfortran* | flang-* | libgfortran-*-dev)
      echo "Fortran compiler (Open MPI's Fortran bindings)" ;;
    # mpirun needs ssh (or rsh) only to start ranks on other hosts; the GPU machine is one host.
    openssh-client | ssh-client)
      echo "remote launch only" ;;
    # Transports for InfiniBand / Omni-Path / libfabric networks: libmpi does not link them, only
    # plugins do (btl openib/ofi/uct, mtl ofi/psm/psm2, pml/osc ucx, reachable netlink); one host
    # uses the shared-memory and TCP transports, which need nothing more.
    libfabric1 | libucx0 | libpsm2-2 | libpsm-infinipath1 | libibverbs1 | libibverbs-dev | \
    ibverbs-providers | librdmacm1 | libnl-* | libnuma1 | libnuma-dev | libefa1)
      echo "network transport (its Open MPI plugins are removed)" ;;
    # hwloc's optional plugins (PCI, X11/GL, OpenCL, libxml2 topology files); its Linux topology
    # discovery, all Open MPI's binding needs, is built into libhwloc itself.
    libhwloc-plugins)
      echo "optional hwloc plugins" ;;
    # What libopenmpi-dev / libpmix-dev pull in for static linking and Open MPI's HTML help; the
    # wrappers (mpicc -showme) link -lmpi alone, and mpi.h includes none of them.
    libhwloc-dev | libevent-dev | libpmix-dev | libltdl-dev | zlib1g-dev | libjs-jquery | libjs-jquery-ui)
      echo "static linking or documentation only" ;;
    # Sources of GoogleTest (libgtest-dev has the built libraries and CMake config) and spdlog's own
    # test framework.
    googletest | catch2)
      echo "sources or upstream tests only" ;;
    *) return 1 ;;
  esac
}

APT_FLAGS=(--no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances)

# closure: fills `chosen` with the packages to fetch and `skipped` with the left-out ones reached
# (and why). Breadth-first over `apt-cache depends` (one level at a time, all of its packages in one
# call), not `--recurse`, so that left-out packages are not walked into and each "a | b" group is
# resolved to one member, as apt would: the member already chosen or asked for, else the first real
# (non-virtual) one.
declare -A chosen=() skipped=()
closure() {
  local -a level=("${ROOTS[@]}") next
  local p
  for p in "${ROOTS[@]}"; do chosen[$p]=1; done
  while ((${#level[@]})); do
    next=()
    # One line per dependency group: "PKG<TAB>alt alt ...", a virtual alternative (<name>) followed
    # by the packages that provide it.
    local pkg group
    while IFS=$'\t' read -r pkg group; do
      local -a alts=() real=()
      local a name any_left_out=0 pick="" why
      read -r -a alts <<<"$group"
      for a in "${alts[@]}"; do
        name=${a#<}; name=${name%>}; name=${name%%:*}
        if why=$(left_out "$name"); then
          any_left_out=1
          skipped[$name]=$why
        elif [[ $a != \<* ]]; then
          real+=("$name")
        fi
      done
      ((any_left_out)) && continue
      for a in "${real[@]}"; do
        [[ -n ${chosen[$a]:-} ]] && { pick=$a; break; }
      done
      [[ -n $pick ]] && continue
      ((${#real[@]})) || die "no installable package for '$group' (needed by $pkg)"
      pick=${real[0]}
      chosen[$pick]=1
      next+=("$pick")
    done < <(apt-cache depends "${APT_FLAGS[@]}" "${level[@]}" | awk '
      function flush() { if (grp != "") print pkg "\t" grp; grp = "" }
      /^[^ ]/ { flush(); pkg = $1; cont = 0; next }
      /^ [ |](Pre)?Depends: / {
        if (!cont) flush()
        grp = (grp == "" ? $2 : grp " " $2)
        cont = ($0 ~ /^ \|/)
        next
      }
      /^    [^ ]/ { grp = grp " " $1; next }   # a provider of the virtual package just listed
      END { flush() }')
    level=("${next[@]}")
  done
}

cmd_fetch() {
  local dir=${1:-$here/.gpudeps} budget=${GPU_DEPS_BUDGET_MIB:-48}
  command -v apt-get >/dev/null || die "fetch needs apt-get (a Debian or Ubuntu machine with network)"
  [[ $(dpkg --print-architecture) == amd64 ]] ||
    die "fetch here downloads this machine's architecture ($(dpkg --print-architecture)); the GPU machine is amd64"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  closure
  local -a pkgs
  mapfile -t pkgs < <(printf '%s\n' "${!chosen[@]}" | sort)
  local p
  for p in $(printf '%s\n' "${!skipped[@]}" | sort); do log "left out $p: ${skipped[$p]}"; done
  log "fetching ${#pkgs[@]} packages into $dir"
  # Only this script's own files are replaced: a re-fetch must not mix old versions in.
  rm -f "$dir"/*.deb "$dir/MANIFEST"
  # As root, apt's download sandbox user (_apt) may not write into DIR; downloading as root is fine.
  (cd "$dir" && apt-get download -q -o APT::Sandbox::User=root "${pkgs[@]}" >&2) ||
    die "apt-get download failed (stale package lists? run apt-get update first)"
  local deb arch
  for deb in "$dir"/*.deb; do
    arch=$(dpkg-deb -f "$deb" Architecture)
    [[ $arch == amd64 || $arch == all ]] || die "$deb is for $arch, not amd64"
    # shellcheck disable=SC2016  # dpkg-deb's own ${Field} syntax
    dpkg-deb -W --showformat='${Package}=${Version}\n' "$deb"
  done | sort >"$dir/MANIFEST"
  local n bytes mib
  n=$(find "$dir" -maxdepth 1 -name '*.deb' | wc -l)
  bytes=$(cat "$dir"/*.deb | wc -c)
  mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
  echo "gpu-deps: $n packages, $mib MiB in $dir (MANIFEST lists them; budget $budget MiB)"
  if awk -v b="$bytes" -v m="$budget" 'BEGIN { exit !(b > m * 1048576) }'; then
    { du -k "$dir"/*.deb | sort -rn | head -5 >&2; } || true
    die "the packages ($mib MiB) are over the budget of $budget MiB (GPU_DEPS_BUDGET_MIB): with the" \
        "repository they must stay under the device tool's 64 MiB working tree"
  fi
}

# ---- install ------------------------------------------------------------------------------------
# Sonames every image with a C/C++ compiler has (glibc, GCC's runtimes, zlib): a plugin needing only
# these and PREFIX's libraries can load there.
BASE_SONAMES=(libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libutil.so.1 libresolv.so.2
  ld-linux-x86-64.so.2 libgcc_s.so.1 libstdc++.so.6 libgomp.so.1 libquadmath.so.0 libatomic.so.1
  libz.so.1)

# sonames_of DEB: the sonames (lib*.so.N) of the shared libraries DEB holds.
sonames_of() {
  dpkg-deb -c "$1" | awk '{ print $6 }' | sed -n -E 's|.*/(lib[^/]*\.so\.[0-9]+).*|\1|p' | sort -u
}

# system_has SONAME: whether the dynamic linker's cache (the image's own libraries) has it, 64-bit.
# (The cache is read once: `ldconfig -p | grep -q` would fail under pipefail when grep stops early.)
ld_cache=""
system_has() {
  [[ -n $ld_cache ]] || ld_cache=$(ldconfig -p 2>/dev/null || true)
  [[ $ld_cache == *$'\t'"$1 (libc6,x86-64"* ]]
}

# missing_sonames FILE LIBDIR "FALLBACK SONAMES": the sonames FILE needs (NEEDED) that are neither
# in LIBDIR (or Open MPI's and PMIx's folders in it) nor base-system nor fallback ones.
missing_sonames() {
  local f=$1 libdir=$2 fallback=" $3 " base=" ${BASE_SONAMES[*]} " needed out=""
  for needed in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [[ $base == *" $needed "* || $fallback == *" $needed "* ]] && continue
    [[ -e $libdir/$needed || -e $libdir/openmpi/lib/$needed || -e $libdir/pmix2/lib/$needed ]] && continue
    out+=" $needed"
  done
  printf '%s' "$out"
}

cmd_install() {
  local dir=${1:-$here/.gpudeps} prefix=${2:-/opt/zerodp-deps}
  [[ -f $dir/MANIFEST ]] || die "no $dir/MANIFEST: run 'bash scripts/gpu/gpu-deps.sh fetch' on a machine with network"
  dir=$(cd "$dir" && pwd)
  # (env.sh and the path rewriting below write PREFIX unquoted, and into sed expressions)
  [[ $prefix == /* && $prefix != *[[:space:]\#\'\"]* && $prefix != / ]] ||
    die "PREFIX must be an absolute path without spaces, quotes or #, not / ('$prefix')"
  command -v dpkg-deb >/dev/null || die "install needs dpkg-deb (Debian or Ubuntu)"
  # The same packages and the same version of this script: nothing to do (a warm machine's rerun).
  local stamp
  stamp=$(cat "$dir/MANIFEST" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
  if [[ -f $prefix/.gpu-deps-stamp && $(cat "$prefix/.gpu-deps-stamp") == "$stamp" && -f $prefix/env.sh ]]; then
    log "$prefix is up to date"
    return 0
  fi
  if [[ -e $prefix ]]; then
    # Never remove a folder this script did not make.
    [[ -f $prefix/.gpu-deps-stamp || -z $(ls -A "$prefix") ]] ||
      die "$prefix exists and was not made by gpu-deps.sh; remove it or pick another PREFIX"
    rm -rf "$prefix"
  fi
  mkdir -p "$prefix"
  # Marks the folder as this script's from the start, so that a failed install can be redone.
  echo incomplete >"$prefix/.gpu-deps-stamp"
  local deb pkg so n=0
  local -a fallback_sonames=()
  for deb in "$dir"/*.deb; do
    pkg=$(dpkg-deb -f "$deb" Package)
    if [[ " ${FALLBACK[*]} " == *" $pkg "* ]]; then
      local -a sos=()
      mapfile -t sos < <(sonames_of "$deb")
      fallback_sonames+=("${sos[@]}")
      local have=1
      for so in "${sos[@]}"; do system_has "$so" || have=0; done
      [[ ${GPU_DEPS_FORCE_FALLBACK:-0} == 1 ]] && have=0
      if ((have)); then
        log "$pkg: the system has ${sos[*]}; not unpacked"
        continue
      fi
    fi
    dpkg -x "$deb" "$prefix"
    n=$((n + 1))
  done
  log "unpacked $n packages into $prefix"

  # Absolute symlinks name the packages' own /usr: point them into PREFIX.
  local link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    [[ $target == /* ]] && ln -sfn "$prefix$target" "$link"
  done < <(find "$prefix" -type l -print0)

  # update-alternatives links, from the maintainer scripts: "--install LINK NAME PATH PRIO" and
  # "--slave LINK NAME PATH", made where PATH was unpacked (Fortran wrappers, man pages: not).
  for deb in "$dir"/*.deb; do
    dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./postinst 2>/dev/null |
      sed -e ':a' -e '/\\$/{N;s/\\\n/ /;ba' -e '}' |
      awk '/update-alternatives/ { for (i = 1; i <= NF; i++)
             if ($i == "--install" || $i == "--slave") print $(i + 1), $(i + 3) }' || true
  done | while read -r link target; do
    [[ $link == /* && $target == /* && $link$target != *'$'* ]] || continue
    [[ -e $prefix$target ]] || continue
    mkdir -p "$(dirname "$prefix$link")"
    ln -sfn "$prefix$target" "$prefix$link"
  done

  # An older glibc or libstdc++ than the packages were built for: said first, plainly.
  check_abi "$prefix"

  # Plugins whose libraries did not travel (the network transports) are removed, so Open MPI and
  # PMIx never try to load them: their load errors would be noise at best. A needed soname counts as
  # present when PREFIX has it, the base system has it, or a fallback package provides it (unpacked
  # or, by construction, on the system): the same decision here and on the GPU machine. Repeated
  # until nothing changes, as a removed libmca_common_* takes its users with it.
  local libdir=$prefix/usr/lib/$ARCH_TRIPLET changed=1 f
  local -a pruned=()
  while ((changed)); do
    changed=0
    while IFS= read -r -d '' f; do
      local missing
      missing=$(missing_sonames "$f" "$libdir" "${fallback_sonames[*]}")
      if [[ -n $missing ]]; then
        pruned+=("${f#"$prefix"/}:$missing")
        rm -f "$f"
        changed=1
      fi
    done < <(find "$libdir/openmpi/lib/openmpi3" "$libdir/pmix2/lib/pmix" -name '*.so' -type f -print0
             find "$libdir" -maxdepth 1 -name 'libmca_common_*.so.*' -type f -print0)
  done
  find "$prefix" -xtype l -delete  # the links to what was removed
  printf '%s\n' "${pruned[@]}" >"$prefix/PRUNED"
  log "removed ${#pruned[@]} plugins whose libraries did not travel (list: $prefix/PRUNED)"
  # Every library and program left must load on this system, through the dynamic linker itself
  # (ldd, with env.sh's LD_LIBRARY_PATH): a soname neither in PREFIX nor on the system (a mistake in
  # left_out, or a base library this image lacks) is said now rather than at the first mpirun.
  local unresolved=""
  while IFS= read -r -d '' f; do
    head -c4 "$f" | grep -q ELF || continue
    local out rc=0
    out=$(LD_LIBRARY_PATH=$libdir ldd "$f" 2>&1) || rc=$?
    missing=$(awk '/not found/ { printf " %s", $1 }' <<<"$out")
    # ldd fails outright when a library it found cannot be loaded (not for a static program)
    if ((rc != 0)) && [[ $out != *"not a dynamic executable"* ]]; then
      missing+=" ($(head -1 <<<"$out"))"
    fi
    [[ -z $missing ]] || unresolved+=$'\n'"  ${f#"$prefix"/}:$missing"
  done < <(find "$libdir" "$libdir/openmpi/lib/openmpi3" "$libdir/pmix2/lib" "$libdir/pmix2/lib/pmix" \
                "$libdir/openblas-openmp" "$prefix/usr/bin" -maxdepth 1 -type f -print0 2>/dev/null)
  [[ -z $unresolved ]] || die "libraries not found (neither travelled nor on this system):$unresolved"

  # Settings, pkg-config, CMake and wrapper files name /usr: PREFIX/usr instead. PMIx's
  # pmix-mca-params.conf, say, sets its plugin path to /usr/.../pmix2/lib/pmix, absent there (and the
  # system's own plugins here); OpenBLASConfig.cmake and some .pc files hold absolute paths too.
  local txt
  while IFS= read -r -d '' txt; do
    sed -i "s#/usr\b#$prefix/usr#g" "$txt"
  done < <(find "$prefix/etc" "$prefix/usr" -path "$prefix/usr/share/doc" -prune -o -type f \
             \( -name '*.pc' -o -name '*.cmake' -o -name '*.conf' -o -name '*-wrapper-data.txt' \) -print0)

  write_env "$prefix" "$dir"
  echo "$stamp" >"$prefix/.gpu-deps-stamp"
  log "installed into $prefix; use: source $prefix/env.sh"
}

write_env() {
  local p=$1 dir=$2 lib=$1/usr/lib/$ARCH_TRIPLET
  cat >"$p/env.sh" <<EOF
# zerodp's dependencies in $p (scripts/gpu/gpu-deps.sh install, from $dir). Source it (also from a
# shell with set -u); it only prepends, so sourcing twice is harmless apart from longer paths.
export ZERODP_DEPS_PREFIX=$p
export PATH=$p/usr/bin\${PATH:+:\$PATH}
# One folder holds every library (libopenblas.so.0 there is the OpenMP build, as update-alternatives
# would have chosen); RUNPATHs in Debian's Open MPI name /usr, which the image does not have.
export LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
# find_package(fmt/spdlog/GTest/benchmark/nlohmann_json/CLI11) and find_path/find_library (liburing)
# search <prefix>/lib/$ARCH_TRIPLET, <prefix>/include and <prefix>/share/cmake of these first.
export CMAKE_PREFIX_PATH=$p/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}
export PKG_CONFIG_PATH=$lib/pkgconfig:$p/usr/share/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}
# (No CPATH or LIBRARY_PATH: CMake passes every include and library folder itself, from the targets
# above and from mpicc -showme, so a build that names none of them would fail rather than find them.)
# Open MPI 4.1 relocated: mpirun, mpicc's wrapper data, the MCA plugins and help files are found
# under OPAL_PREFIX (ompi_info --path all shows it). Debian configured its sysconfdir as /etc/openmpi,
# not under the prefix: OPAL_SYSCONFDIR points it at PREFIX's copy, whose openmpi-mca-params.conf
# excludes the transports that did not travel and whose default hostfile mpirun reads.
export OPAL_PREFIX=$p/usr
export OPAL_SYSCONFDIR=$p/etc/openmpi
# PMIx (Debian's libpmix2, configured with prefix /usr/lib/$ARCH_TRIPLET/pmix2 and its data, settings
# and library folders as absolute paths, which PMIX_PREFIX alone does not move): each one named, or
# its help files and plugins (pcompress, prm) are looked for under /usr, which the GPU machine lacks.
export PMIX_PREFIX=$lib/pmix2 PMIX_EXEC_PREFIX=$lib/pmix2
export PMIX_DATAROOTDIR=$lib/pmix2/share PMIX_DATADIR=$lib/pmix2/share PMIX_SYSCONFDIR=$lib/pmix2/share
export PMIX_LIBDIR=$lib/pmix2/lib PMIX_INCLUDEDIR=$lib/pmix2/include
# mpirun insists on finding ssh or rsh (plm_rsh_agent) even to start ranks on this host alone, and
# stops when neither exists (openssh-client did not travel): the program "false" satisfies the
# lookup and is never run for local ranks. A machine with ssh keeps Open MPI's default.
zerodp_rsh=0
for zerodp_agent in ssh rsh; do
  zerodp_path=\$(command -v "\$zerodp_agent" 2>/dev/null) && [ -f "\$zerodp_path" ] && [ -x "\$zerodp_path" ] && zerodp_rsh=1
done
[ "\$zerodp_rsh" = 1 ] || export OMPI_MCA_plm_rsh_agent=false
unset zerodp_rsh zerodp_agent zerodp_path
# hwloc's optional plugins did not travel: look for them here only, not in the system's folder, so
# that a machine with its own hwloc behaves as the GPU machine does.
export HWLOC_PLUGINS_PATH=$lib/hwloc
# For zerodp's configure (scripts/gpu/gpu-check.sh passes them): CMakeLists.txt looks for OpenBLAS in
# /usr/lib/$ARCH_TRIPLET/openblas-openmp first, and FindMPI asks the mpicc on PATH; named here, no
# system copy can be picked instead.
export ZERODP_CMAKE_ARGS="-DMPI_C_COMPILER=$p/usr/bin/mpicc -DMPIEXEC_EXECUTABLE=$p/usr/bin/mpiexec -DZERODP_BLAS_LIBRARY=$lib/openblas-openmp/libopenblas.so -DCBLAS_INCLUDE_DIR=$p/usr/include/$ARCH_TRIPLET/openblas-openmp"
EOF
}

# check_abi PREFIX: the packages were built for one distribution's glibc and libstdc++ (Debian 12:
# glibc 2.36, GCC 12); an older system (Ubuntu 22.04 has glibc 2.35) cannot load them. Said here, by
# the newest symbol versions they ask for against the system's, rather than by the first mpirun.
check_abi() {
  local prefix=$1 want_glibc want_cxx have_glibc have_cxx libstdcxx
  local -a elfs
  mapfile -t elfs < <(find "$prefix/usr" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec sh -c \
    'for f; do head -c4 "$f" | grep -q ELF && echo "$f"; done' sh {} +)
  ((${#elfs[@]})) || return 0
  local needs
  needs=$(for f in "${elfs[@]}"; do objdump -T "$f" 2>/dev/null | grep -F '*UND*' || true; done |
          grep -oE '\b(GLIBC|GLIBCXX)_[0-9.]+' | sort -u -V || true)
  want_glibc=$(grep '^GLIBC_' <<<"$needs" | tail -1 | cut -d_ -f2)
  want_cxx=$(grep '^GLIBCXX_' <<<"$needs" | tail -1 | cut -d_ -f2)
  have_glibc=$(getconf GNU_LIBC_VERSION | awk '{ print $2 }')
  system_has libstdc++.so.6 || die "the system has no libstdc++.so.6 (a compiler's runtime)"
  libstdcxx=$(awk '/libstdc\+\+\.so\.6 \(libc6,x86-64/ { print $NF; exit }' <<<"$ld_cache")
  have_cxx=$(objdump -T "$libstdcxx" 2>/dev/null | grep -oE 'GLIBCXX_[0-9.]+' | sort -u -V | tail -1 | cut -d_ -f2)
  older() { [[ -n $2 && $1 != "$2" && $(printf '%s\n' "$1" "$2" | sort -V | head -1) == "$1" ]]; }
  if older "$have_glibc" "$want_glibc" || older "${have_cxx:-0}" "$want_cxx"; then
    die "the packages need glibc $want_glibc and libstdc++ GLIBCXX_$want_cxx; this system has glibc" \
        "$have_glibc and GLIBCXX_${have_cxx:-?}: fetch them from an older distribution's packages"
  fi
  log "ABI: the packages need glibc $want_glibc, GLIBCXX_$want_cxx; the system has $have_glibc, GLIBCXX_$have_cxx"
}

cmd_env() {
  local dir=${1:-$here/.gpudeps} prefix=${2:-/opt/zerodp-deps}
  # A failed install must fail the shell that sources this output (a process substitution's own
  # status is lost): it then reads a `return 1`.
  if ! (cmd_install "$dir" "$prefix") >&2; then
    echo 'echo "gpu-deps: install failed" >&2; return 1'
    exit 1
  fi
  cat "$prefix/env.sh"
}

verb=${1:-}
shift || true
case $verb in
  fetch) cmd_fetch "$@" ;;
  install) cmd_install "$@" ;;
  env) cmd_env "$@" ;;
  *) die "usage: $0 fetch [DIR] | install [DIR] [PREFIX] | env [DIR] [PREFIX]" ;;
esac
