#include "dist/comm.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include <fmt/core.h>

#include "common/error.h"

#ifdef NORMLAB_HAVE_MPI
#include <mpi.h>
#endif

namespace normlab::dist {

namespace {

World the_world;

#ifdef NORMLAB_HAVE_MPI
bool initialized = false;  // MPI_Init ran (under a launcher)
constexpr int kTextTag = 7;

// Sums in buckets of 1 Mi elements (MPI counts are ints; a bucket is 4 MiB in fp32, large enough that the
// per-call latency is small beside its transfer).
template <typename T>
void sum_buckets(T* data, std::size_t count, MPI_Datatype type) {
  constexpr std::size_t kBucket = std::size_t{1} << 20;
  for (std::size_t at = 0; at < count; at += kBucket)
    MPI_Allreduce(MPI_IN_PLACE, data + at, static_cast<int>(std::min(kBucket, count - at)), type, MPI_SUM,
                  MPI_COMM_WORLD);
}

// The message a probe found.
World::Message take(const MPI_Status& status) {
  int length = 0;
  MPI_Get_count(&status, MPI_CHAR, &length);
  World::Message m{status.MPI_SOURCE, std::string(static_cast<std::size_t>(length), '\0')};
  MPI_Recv(m.text.data(), length, MPI_CHAR, status.MPI_SOURCE, kTextTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return m;
}
#endif

}  // namespace

bool built_with_mpi() {
#ifdef NORMLAB_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::string mpi_description() {
#ifdef NORMLAB_HAVE_MPI
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string_view text(version, static_cast<std::size_t>(length));
  text = text.substr(0, text.find_first_of(",\n"));
  return fmt::format("built with MPI ({}): `mpirun -np N normlab train|study|sweep ...` spreads the work", text);
#else
  return "built without MPI: single process only (install libopenmpi-dev and rebuild for mpirun)";
#endif
}

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name)) return true;
  return false;
}

void init([[maybe_unused]] int* argc, [[maybe_unused]] char*** argv) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  the_world.host_ = host;
#ifdef NORMLAB_HAVE_MPI
  if (!launched_by_mpi()) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  initialized = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &the_world.rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &the_world.size_);
#else
  if (launched_by_mpi())
    fail(
        "this normlab was started by an MPI launcher but built without MPI: install libopenmpi-dev (scripts/setup.sh "
        "does) and rebuild, or run it without mpirun");
#endif
}

void finalize() {
#ifdef NORMLAB_HAVE_MPI
  if (initialized) MPI_Finalize();
  initialized = false;
#endif
}

void abort_job(int code) {
#ifdef NORMLAB_HAVE_MPI
  if (initialized && the_world.size() > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

const World& world() { return the_world; }

std::string World::where() const { return fmt::format("rank {} of {} on {}", rank_, size_, host_); }

#ifdef NORMLAB_HAVE_MPI
void World::sum(float* data, std::size_t count) const {
  if (distributed()) sum_buckets(data, count, MPI_FLOAT);
}
void World::sum(double* data, std::size_t count) const {
  if (distributed()) sum_buckets(data, count, MPI_DOUBLE);
}
void World::broadcast(void* data, std::size_t bytes) const {
  if (!distributed()) return;
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  for (std::size_t at = 0; at < bytes; at += kChunk)
    MPI_Bcast(static_cast<char*>(data) + at, static_cast<int>(std::min(kChunk, bytes - at)), MPI_BYTE, 0,
              MPI_COMM_WORLD);
}
void World::barrier() const {
  if (distributed()) MPI_Barrier(MPI_COMM_WORLD);
}
void World::send(int to, const std::string& text) const {
  if (!distributed()) fail("internal: a message to rank {} in a single-process run", to);
  MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, to, kTextTag, MPI_COMM_WORLD);
}
std::optional<World::Message> World::try_receive() const {
  if (!distributed()) return std::nullopt;
  int waiting = 0;
  MPI_Status status;
  MPI_Iprobe(MPI_ANY_SOURCE, kTextTag, MPI_COMM_WORLD, &waiting, &status);
  if (!waiting) return std::nullopt;
  return take(status);
}
World::Message World::receive() const {
  if (!distributed()) fail("internal: waiting for a message in a single-process run");
  MPI_Status status;
  MPI_Probe(MPI_ANY_SOURCE, kTextTag, MPI_COMM_WORLD, &status);
  return take(status);
}
#else
// A world of one: sums and broadcasts leave the data as it is, and there is nobody to message.
void World::sum(float*, std::size_t) const {}
void World::sum(double*, std::size_t) const {}
void World::broadcast(void*, std::size_t) const {}
void World::barrier() const {}
void World::send(int to, const std::string&) const { fail("internal: a message to rank {} without MPI", to); }
std::optional<World::Message> World::try_receive() const { return std::nullopt; }
World::Message World::receive() const { fail("internal: waiting for a message without MPI"); }
#endif

}  // namespace normlab::dist
