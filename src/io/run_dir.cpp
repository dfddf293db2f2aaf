#include "io/run_dir.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace zerodp::io {

namespace {

constexpr const char* kPrefix = "zerodp-offload.";

// Field 22 of /proc/<pid>/stat: the start time in clock ticks after boot (the command name, field 2,
// is in parentheses and may hold spaces: the fields are counted after its closing one). 0: unknown,
// or a zombie (field 3 "Z": it has exited and holds no files; a killed job's ranks stay zombies a
// while where nobody reaps them, e.g. under a container's init).
uint64_t start_ticks_of(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = all.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(all.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3 && (field == "Z" || field == "X")) return 0;
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
}

std::string sanitized_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) std::strcpy(buf, "unknown");
  std::string h(buf);
  for (char& c : h)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-')) c = '-';
  return h.empty() ? "unknown" : h.substr(0, 64);
}

// Parses "zerodp-offload.<host>.<pid>.<start>.<run>" (and the older form without <run>); false when
// the name is not one of ours. The host has no '.' (sanitized_host).
bool parse_run_dir_name(const std::string& name, ProcessIdentity& id) {
  if (name.rfind(kPrefix, 0) != 0) return false;
  std::vector<std::string> fields;
  std::string rest = name.substr(std::strlen(kPrefix));
  for (size_t at = 0;;) {
    const size_t dot = rest.find('.', at);
    fields.push_back(rest.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (fields.size() != 3 && fields.size() != 4) return false;
  for (size_t i = 1; i < fields.size(); ++i)
    if (!digits(fields[i])) return false;
  if (fields[0].empty()) return false;
  id.host = fields[0];
  id.pid = std::stoll(fields[1]);
  id.start_ticks = std::stoull(fields[2]);
  return true;
}

// Files a run creates in its directory: rank<digits>-<word>.
bool is_run_file(const std::string& name) {
  if (name.rfind("rank", 0) != 0) return false;
  const size_t dash = name.find('-');
  return dash != std::string::npos && dash > 4 &&
         name.substr(4, dash - 4).find_first_not_of("0123456789") == std::string::npos;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

}  // namespace

ProcessIdentity this_process() {
  ProcessIdentity id;
  id.host = sanitized_host();
  id.pid = static_cast<int64_t>(::getpid());
  id.start_ticks = start_ticks_of(id.pid);
  return id;
}

bool process_alive(int64_t pid, uint64_t start_ticks) {
  const uint64_t now = start_ticks_of(pid);
  return now != 0 && now == start_ticks;
}

uint64_t next_run_number() {
  static std::atomic<uint64_t> next{0};
  return next++;
}

std::string run_dir_name(const ProcessIdentity& owner, uint64_t run) {
  return std::string(kPrefix) + owner.host + "." + std::to_string(owner.pid) + "." + std::to_string(owner.start_ticks) +
         "." + std::to_string(run);
}

int remove_stale_run_dirs(const std::string& nvme_path) {
  const std::string host = sanitized_host();
  int removed = 0;
  for (const std::string& name : entries(nvme_path)) {
    ProcessIdentity owner;
    if (!parse_run_dir_name(name, owner) || owner.host != host) continue;
    if (process_alive(owner.pid, owner.start_ticks)) continue;
    const std::string dir = nvme_path + "/" + name;
    for (const std::string& f : entries(dir))
      if (is_run_file(f)) ::unlink((dir + "/" + f).c_str());
    if (::rmdir(dir.c_str()) == 0) ++removed;
  }
  return removed;
}

RunDir::RunDir(const std::string& nvme_path, const std::string& name) : path_(nvme_path + "/" + name) {
  struct stat st {};
  ZDP_REQUIRE(!nvme_path.empty(), "NVMe offload needs --nvme-path DIR (zero_optimization.offload_*.nvme_path)");
  ZDP_REQUIRE(::stat(nvme_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
              "--nvme-path {}: not a directory ({})", nvme_path, std::strerror(errno));
  ZDP_REQUIRE(::access(nvme_path.c_str(), W_OK | X_OK) == 0, "--nvme-path {}: not writable ({})", nvme_path,
              std::strerror(errno));
  if (::mkdir(path_.c_str(), 0700) != 0 && errno != EEXIST)
    throw RuntimeFailure(fmt::format("cannot create the offload directory {}: {}", path_, std::strerror(errno)));
}

RunDir::~RunDir() { ::rmdir(path_.c_str()); }  // ENOENT, harmlessly, when another rank was first

}  // namespace zerodp::io
