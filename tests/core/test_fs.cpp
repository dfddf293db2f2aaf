// Atomic file writing (the target is either the old file or the new, the temporary never lingers)
// and read-only memory maps, with errors that name the path and the reason.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/fs.h"

namespace zerodp {
namespace {

class FsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/zerodp_fs_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& name : entries()) {
      const std::string p = dir_ + "/" + name;
      struct stat st;
      if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        ::rmdir(p.c_str());
      } else {
        ::unlink(p.c_str());
      }
    }
    ::rmdir(dir_.c_str());
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") out.push_back(n);
      }
      ::closedir(d);
    }
    return out;
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

TEST_F(FsTest, WriteFileAtomicCreatesAndReplaces) {
  const std::string p = path("a.bin");
  write_file_atomic(p, std::string("first"));
  EXPECT_EQ(read_file(p), "first");
  write_file_atomic(p, std::string("second, longer"));
  EXPECT_EQ(read_file(p), "second, longer");
  EXPECT_EQ(entries(), std::vector<std::string>{"a.bin"});  // no temporary left behind
}

TEST_F(FsTest, StreamingWriterPublishesOnlyOnCommit) {
  const std::string p = path("stream.bin");
  AtomicFile f(p);
  f.write(std::string("abc"));
  f.write("defgh", 5);
  EXPECT_EQ(f.bytes_written(), 8u);
  EXPECT_FALSE(file_exists(p));  // not visible yet
  EXPECT_TRUE(file_exists(f.temp_path()));
  EXPECT_EQ(f.temp_path().rfind(dir_ + "/", 0), 0u) << "the temporary must be in the target's directory";
  f.commit();
  EXPECT_TRUE(f.committed());
  EXPECT_EQ(read_file(p), "abcdefgh");
  EXPECT_EQ(entries().size(), 1u);
}

// Caching::kDirect stages the bytes in whole blocks around the page cache: pieces of any length, across
// the staging buffer's edge (8 MiB), give the same file, cut to its length; abandoned, the old target
// stays. Where the file system refuses O_DIRECT (tmpfs) the same bytes go through the page cache.
TEST_F(FsTest, DirectWritesGiveTheSameBytes) {
  const std::string p = path("direct.bin");
  write_file_atomic(p, std::string("old"));
  std::string want;
  {
    AtomicFile f(p, AtomicFile::Caching::kDirect);
    RecordProperty("direct", f.direct() ? "yes" : "no (the file system refused O_DIRECT)");
    for (size_t n : {size_t{3}, size_t{4093}, (size_t{9} << 20) + 5, size_t{1}, size_t{4096}, (size_t{7} << 20) + 11}) {
      std::string piece(n, '\0');
      for (size_t i = 0; i < n; ++i) piece[i] = static_cast<char>((i * 131 + want.size()) % 251);
      f.write(piece);
      want += piece;
    }
    EXPECT_EQ(f.bytes_written(), want.size());
    f.flush();
    struct stat st;
    ASSERT_EQ(::stat(f.temp_path().c_str(), &st), 0);
    if (f.direct()) {
      EXPECT_EQ(static_cast<size_t>(st.st_size), want.size() / 4096 * 4096);  // whole blocks only
    }
    EXPECT_EQ(read_file(p), "old");  // not visible before the commit
    f.commit();
  }
  EXPECT_EQ(read_file(p), want);
  EXPECT_EQ(entries(), std::vector<std::string>{"direct.bin"});
  {
    AtomicFile f(p, AtomicFile::Caching::kDirect);
    f.write(std::string(10u << 20, 'x'));  // a whole staging buffer went out to the temporary
  }
  EXPECT_EQ(read_file(p), want);
  EXPECT_EQ(entries(), std::vector<std::string>{"direct.bin"});
}

// Under Caching::kDirect, bytes whose address lines up with their offset in the file go out at once,
// straight from the caller's memory (only the partial blocks at their ends are staged): the file holds
// them before 8 MiB have gathered. Bytes that do not line up are staged as before; the file is the same.
TEST_F(FsTest, DirectWritesFromAlignedMemoryGoStraightToTheFile) {
  constexpr size_t kBlock = 4096, kMemory = size_t{4} << 20;
  std::unique_ptr<uint8_t, decltype(&std::free)> memory(static_cast<uint8_t*>(std::aligned_alloc(kBlock, kMemory)),
                                                        &std::free);
  ASSERT_NE(memory, nullptr);
  for (size_t i = 0; i < kMemory; ++i) memory.get()[i] = static_cast<uint8_t>((i * 7 + 3) % 253);
  const std::string p = path("aligned.bin");
  std::string want;
  AtomicFile f(p, AtomicFile::Caching::kDirect);
  auto write = [&](size_t at, size_t n) {
    f.write(memory.get() + at, n);
    want.append(reinterpret_cast<const char*>(memory.get()) + at, n);
  };
  auto on_disk = [&] {
    struct stat st;
    EXPECT_EQ(::stat(f.temp_path().c_str(), &st), 0);
    return static_cast<size_t>(st.st_size);
  };
  write(kMemory - 100, 100);    // a header: staged
  write(100, size_t{1} << 20);  // at file offset 100, from an address 100 past a block: lines up
  if (f.direct()) {
    EXPECT_EQ(on_disk(), want.size() / kBlock * kBlock);  // all but the last partial block
  }
  write(5, 1000);             // does not line up: staged
  write(8, size_t{2} << 20);  // nor does this
  if (f.direct()) {
    EXPECT_EQ(on_disk(), ((size_t{1} << 20) + 100) / kBlock * kBlock);  // staged, under 8 MiB
  }
  const size_t at = want.size() % kBlock;  // lines up again
  write(at, kBlock - 1);                   // but shorter than a whole block past the partial one
  write(at + kBlock - 1, kMemory / 2 + 3);
  f.commit();
  EXPECT_EQ(read_file(p), want);
}

TEST_F(FsTest, DestroyedWithoutCommitLeavesNoFileAndTheOldTargetIntact) {
  const std::string fresh = path("fresh.bin"), old = path("old.bin");
  write_file_atomic(old, std::string("old content"));
  {
    AtomicFile a(fresh);
    a.write(std::string("never published"));
    AtomicFile b(old);
    b.write(std::string("half-written replacement"));
  }
  EXPECT_FALSE(file_exists(fresh));
  EXPECT_EQ(read_file(old), "old content");
  EXPECT_EQ(entries(), std::vector<std::string>{"old.bin"});
}

TEST_F(FsTest, ExceptionWhileStreamingLeavesTheTargetIntact) {
  const std::string p = path("model.bin");
  write_file_atomic(p, std::string("good"));
  try {
    AtomicFile f(p);
    f.write(std::string("partial"));
    throw std::runtime_error("producer failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read_file(p), "good");
  EXPECT_EQ(entries().size(), 1u);
}

TEST_F(FsTest, FailedRenameRemovesTheTemporaryAndSaysWhy) {
  // A non-empty directory cannot be replaced by a file: the rename fails at commit.
  const std::string target = path("occupied");
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  write_file_atomic(target + "/inside", std::string("x"));
  AtomicFile f(target);
  f.write(std::string("data"));
  try {
    f.commit();
    FAIL() << "commit over a directory succeeded";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find(target), std::string::npos) << e.what();
  }
  EXPECT_EQ(entries(), std::vector<std::string>{"occupied"});
  EXPECT_EQ(read_file(target + "/inside"), "x");
  ::unlink((target + "/inside").c_str());
}

TEST_F(FsTest, CannotCreateInAMissingDirectory) {
  const std::string p = path("no/such/dir/out.bin");
  try {
    AtomicFile f(p);
    FAIL() << "created a file in a missing directory";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  }
}

TEST_F(FsTest, MappedFileSeesTheBytes) {
  const std::string p = path("m.bin");
  std::string content(10000, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 7 + 3);
  write_file_atomic(p, content);
  MappedFile m(p);
  ASSERT_EQ(m.size(), content.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data()), m.size()), content);
  EXPECT_EQ(m.path(), p);
  // Moves hand the mapping over.
  MappedFile moved = std::move(m);
  EXPECT_EQ(moved.size(), content.size());
  EXPECT_EQ(moved.data()[1], static_cast<uint8_t>(10));
  EXPECT_EQ(m.data(), nullptr);
  MappedFile assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.size(), content.size());
}

TEST_F(FsTest, MappedEmptyFile) {
  const std::string p = path("empty.bin");
  write_file_atomic(p, std::string());
  MappedFile m(p);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.data(), nullptr);
  EXPECT_TRUE(m.is_open());
}

TEST_F(FsTest, MappedFileErrorsNameThePath) {
  const std::string missing = path("missing.bin");
  try {
    MappedFile m(missing);
    FAIL() << "mapped a missing file";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(missing), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  }
  EXPECT_THROW(MappedFile m(dir_), UsageError);  // a directory is not a file to map
  EXPECT_THROW(read_file(missing), UsageError);
}

}  // namespace
}  // namespace zerodp
