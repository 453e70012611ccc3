#include "dist/comm.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <type_traits>

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
bool serialized = false;   // MPI provides MPI_THREAD_SERIALIZED: a second thread may make the calls
bool one_host = true;      // every rank shares this host's memory
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
  the_world.hosts_ = {host};
#ifdef NORMLAB_HAVE_MPI
  if (!launched_by_mpi()) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  initialized = true;
  serialized = provided >= MPI_THREAD_SERIALIZED;
  MPI_Comm same_host;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &same_host);
  int host_size = 0, world_size = 0;
  MPI_Comm_size(same_host, &host_size);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_free(&same_host);
  one_host = host_size == world_size;
  MPI_Comm_rank(MPI_COMM_WORLD, &the_world.rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &the_world.size_);
  std::vector<char> names(sizeof host * static_cast<std::size_t>(world_size));
  MPI_Allgather(host, sizeof host, MPI_CHAR, names.data(), sizeof host, MPI_CHAR, MPI_COMM_WORLD);
  the_world.hosts_.clear();
  for (int r = 0; r < world_size; ++r)
    the_world.hosts_.emplace_back(names.data() + sizeof host * static_cast<std::size_t>(r));
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

std::string World::where() const { return fmt::format("rank {} of {} on {}", rank_, size_, host(rank_)); }

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
#else
// A world of one: sums and broadcasts leave the data as it is, and there is nobody to message.
void World::sum(float*, std::size_t) const {}
void World::sum(double*, std::size_t) const {}
void World::broadcast(void*, std::size_t) const {}
void World::barrier() const {}
void World::send(int to, const std::string&) const { fail("internal: a message to rank {} without MPI", to); }
std::optional<World::Message> World::try_receive() const { return std::nullopt; }
#endif

// ---------------------------------------------------------------------------------------------
// OverlappedSum

struct OverlappedSum::State {
  std::byte* data;
  std::size_t count, element;
  // A bucket of 256 Ki elements (1 MiB in fp32): small enough that the first ones are summed early in the
  // backward pass, large enough that a call's latency is small beside its transfer.
  static constexpr std::size_t kBucket = std::size_t{1} << 18;
  std::mutex mutex;
  std::condition_variable changed;
  std::size_t ready = 0;  // [ready, count) is final (guarded by mutex)
  bool stop = false;
  std::thread worker;
#ifdef NORMLAB_HAVE_MPI
  MPI_Datatype type;
#endif

  std::function<void()> sum_all;  // World::sum of the whole buffer, when there is no communication thread
  // One bucket's sum, from the communication thread, which must not spin while it waits for the other ranks: a
  // blocking MPI call polls, and on a machine whose cores all compute that polling takes a core from the backward
  // pass (measured: 10-15% slower steps at 2 ranks on 2 cores). It starts the sum and looks at it every 50 µs.
  void sum_range(std::size_t begin, std::size_t end) const {
#ifdef NORMLAB_HAVE_MPI
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, data + begin * element, static_cast<int>(end - begin), type, MPI_SUM, MPI_COMM_WORLD,
                   &request);
    for (int done = 0;;) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) return;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
#else
    (void)begin, (void)end;
#endif
  }
  // The buckets from the last to the first, each once the caller has declared it final.
  void run() {
    for (std::size_t end = count; end > 0;) {
      const std::size_t begin = end > kBucket ? end - kBucket : 0;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return ready <= begin || stop; });
        if (stop) return;
      }
      sum_range(begin, end);
      end = begin;
    }
  }
};

bool OverlappedSum::overlaps() {
#ifdef NORMLAB_HAVE_MPI
  // By default only across hosts: there the sum waits on the network and its thread mostly sleeps, while on one
  // host it is memory copies on the cores that compute, which the overlap cannot hide (measured on 2 cores: 3.7%
  // slower steps with it, docs/scaling.md).
  static const char* const setting = std::getenv("NORMLAB_ALLREDUCE_OVERLAP");
  static const bool wanted = setting ? std::string_view(setting) != "0" : !one_host;
  return serialized && the_world.distributed() && wanted;
#else
  return false;
#endif
}

template <typename T>
std::unique_ptr<OverlappedSum::State> OverlappedSum::make(T* data, std::size_t count) {
  auto s = std::make_unique<State>();
  s->data = reinterpret_cast<std::byte*>(data), s->count = count, s->element = sizeof(T), s->ready = count;
  s->sum_all = [data, count] { the_world.sum(data, count); };
#ifdef NORMLAB_HAVE_MPI
  s->type = std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
#endif
  if (overlaps()) s->worker = std::thread([state = s.get()] { state->run(); });
  return s;
}

OverlappedSum::OverlappedSum(float* data, std::size_t count) : state_(make(data, count)) {}
OverlappedSum::OverlappedSum(double* data, std::size_t count) : state_(make(data, count)) {}

void OverlappedSum::ready_from(std::size_t first) {
  if (!state_->worker.joinable()) return;
  {
    const std::lock_guard lock(state_->mutex);
    if (first >= state_->ready) return;
    state_->ready = first;
  }
  state_->changed.notify_one();
}

void OverlappedSum::finish() {
  if (state_->worker.joinable()) {
    ready_from(0);
    state_->worker.join();
  } else {
    state_->sum_all();
  }
}

OverlappedSum::~OverlappedSum() {
  if (!state_->worker.joinable()) return;
  {
    const std::lock_guard lock(state_->mutex);
    state_->stop = true;
  }
  state_->changed.notify_one();
  state_->worker.join();
}

}  // namespace normlab::dist
