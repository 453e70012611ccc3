#pragma once
// The processes of one job. Under an MPI launcher (mpirun, srun) normlab's processes form MPI's world;
// started any other way it is a world of one, and MPI is never initialized (a single-process run costs
// nothing and needs no launcher). A build without MPI (NORMLAB_MPI=OFF, or no OpenMPI found) has only
// the world of one.
//
// What normlab needs from MPI is small: summing buffers over every rank (data-parallel gradients and
// losses), one broadcast (the initial weights), and short text messages between a coordinator and its
// workers (a study's runs). It is all here, so no other layer includes <mpi.h>.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace normlab::dist {

// True when this binary was built with MPI.
bool built_with_mpi();
// For --help: "built with MPI (Open MPI v4.1.4): ..." or "built without MPI: single process only (...)".
std::string mpi_description();

// Joins the launcher's job when there is one (MPI_Init_thread, funneled: only the main thread calls MPI).
// Call once from main before anything else; finalize() at a normal exit.
void init(int* argc, char*** argv);
void finalize();
// Ends every process of the job with `code` (MPI_Abort); a world of one just exits.
[[noreturn]] void abort_job(int code);

// True when a process was started by an MPI launcher (it sets OMPI_COMM_WORLD_SIZE / PMIX_RANK / PMI_RANK).
// A study's runs are separate normlab processes: they are started without these variables.
bool launched_by_mpi();

class World {
 public:
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool distributed() const { return size_ > 1; }
  // "rank 1 of 4 on host-b"
  std::string where() const;
  // The host that rank `rank` runs on (its gethostname).
  const std::string& host(int rank) const { return hosts_.at(static_cast<std::size_t>(rank)); }

  // In-place sums over every rank, exact for the given type (each rank ends with the same bits).
  void sum(float* data, std::size_t count) const;
  void sum(double* data, std::size_t count) const;
  // Rank 0's `bytes` bytes at data to every rank.
  void broadcast(void* data, std::size_t bytes) const;
  void barrier() const;

  // Coordinator/worker messages: a text to one rank, and the next one waiting for this rank, if any. There is
  // no blocking receive: MPI's blocking calls poll, and an idle worker must leave its core to the runs.
  struct Message {
    int source;
    std::string text;
  };
  void send(int to, const std::string& text) const;
  std::optional<Message> try_receive() const;

 private:
  friend void init(int*, char***);
  int rank_ = 0, size_ = 1;
  std::vector<std::string> hosts_;  // by rank
};

const World& world();

// Sums one buffer over every rank while the caller keeps computing: data-parallel gradients during the backward
// pass. The buffer is cut into fixed buckets counted from its end, the same on every rank, so that every rank makes
// the same collective calls in the same order; a communication thread sums each bucket, the last first, as soon as
// the caller has declared final the tail that holds it (ready_from). finish() declares the whole buffer final and
// waits until it is summed. It needs MPI_THREAD_SERIALIZED (the caller makes no MPI call of its own before
// finish() returns); where MPI provides less, finish() sums the whole buffer itself, and a world of one has
// nothing to sum.
class OverlappedSum {
 public:
  OverlappedSum(float* data, std::size_t count);
  OverlappedSum(double* data, std::size_t count);
  OverlappedSum(const OverlappedSum&) = delete;
  OverlappedSum& operator=(const OverlappedSum&) = delete;
  ~OverlappedSum();  // without finish(): stops after the bucket in flight (an error is ending the job)
  void ready_from(std::size_t first);  // elements [first, count) will not change any more
  void finish();
  // Whether this job sums during the computation: more than one rank, MPI_THREAD_SERIALIZED provided, and the
  // ranks on more than one host, or NORMLAB_ALLREDUCE_OVERLAP=1 (=0 turns it off everywhere).
  static bool overlaps();

 private:
  struct State;
  template <typename T>
  static std::unique_ptr<State> make(T* data, std::size_t count);
  std::unique_ptr<State> state_;
};

}  // namespace normlab::dist
