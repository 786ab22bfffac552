#include "coordinator/state_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "common/process_holders.h"

namespace pipecoord::coordinator {
namespace {

constexpr const char* kSchema = R"sql(
  CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
                                   job BLOB NOT NULL);
  CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL,
                                     event BLOB NOT NULL);
  CREATE TABLE IF NOT EXISTS steps (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL,
                                    step BLOB NOT NULL);
  CREATE TABLE IF NOT EXISTS telemetry (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL,
                                        batch BLOB NOT NULL);
  CREATE TABLE IF NOT EXISTS checkpoints (job_id TEXT PRIMARY KEY, steps INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS workers (id TEXT PRIMARY KEY);
  CREATE INDEX IF NOT EXISTS events_job ON events (job_id);
  CREATE INDEX IF NOT EXISTS steps_job ON steps (job_id);
  CREATE INDEX IF NOT EXISTS telemetry_job ON telemetry (job_id);
  INSERT OR IGNORE INTO meta VALUES ('format', 1);
)sql";

// One prepared statement, finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  Stmt& Text(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Blob(int i, const std::string& v) {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Int(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  int Step() { return sqlite3_step(s_); }
  std::string ColumnBytes(int i) {
    const void* p = sqlite3_column_blob(s_, i);
    return p ? std::string(static_cast<const char*>(p), sqlite3_column_bytes(s_, i)) : std::string();
  }
  int64_t ColumnInt(int i) { return sqlite3_column_int64(s_, i); }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_;
};

// The SQLite file (StateStore::Open).
class SqliteStateStore final : public StateStore {
 public:
  SqliteStateStore(sqlite3* db, std::string path, int lock_fd) : db_(db), path_(std::move(path)), lock_fd_(lock_fd) {}
  ~SqliteStateStore() override;
  Status PutJob(const v1::Job& job) override;
  Status AppendEvent(const std::string& job_id, const std::string& event_bytes) override;
  Status AppendStep(const std::string& job_id, const v1::StepRecord& step) override;
  Result<int64_t> AppendTelemetry(const std::string& job_id, const v1::TelemetryBatch& batch) override;
  Status AppendTelemetryRows(const std::vector<TelemetryRow>& rows, std::vector<int64_t>* seqs) override;
  Status AppendEvents(const std::vector<std::pair<std::string, std::string>>& events) override;
  Status DropTelemetryBefore(const std::string& job_id, int64_t seq) override;
  Status PutCheckpointedSteps(const std::string& job_id, int n) override;
  Status PutWorker(const std::string& worker_id) override;
  Status PutCounters(uint64_t next_job, uint64_t next_worker, uint64_t next_session, uint64_t epoch) override;
  Status DeleteJob(const std::string& job_id) override;
  Result<StoredState> Load(std::vector<std::vector<std::string>>* events_by_job) override;
  std::string where() const override { return "state file " + path_; }
  Status Exec(const char* sql);

 private:
  sqlite3* db_;
  std::string path_;
  int lock_fd_;  // flock()ed for the store's life
};

}  // namespace

Status StateStore::AppendEvents(const std::vector<std::pair<std::string, std::string>>& events) {
  for (const auto& [job_id, bytes] : events) PIPECOORD_RETURN_IF_ERROR(AppendEvent(job_id, bytes));
  return Status::Ok();
}

Status StateStore::AppendTelemetryRows(const std::vector<TelemetryRow>& rows, std::vector<int64_t>* seqs) {
  seqs->clear();
  for (const TelemetryRow& row : rows) {
    auto seq = AppendTelemetry(*row.job_id, *row.batch);
    if (!seq.ok()) return seq.status();
    seqs->push_back(*seq);
  }
  return Status::Ok();
}

Result<std::unique_ptr<StateStore>> StateStore::Open(const std::string& path) {
  // The lock comes first, so a second coordinator never touches a file another one writes. flock
  // (not fcntl) locks belong to the open file, so they neither clash with SQLite's own fcntl locks
  // nor let a second store in the same process through.
  const int lock_fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) return Unavailable("--state " + path + ": cannot open " + path + ": " + std::strerror(errno));
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(lock_fd);
    if (err != EWOULDBLOCK) return Unavailable("--state " + path + ": cannot lock " + path + ": " + std::strerror(err));
    const std::string holder = FileLockHolder(path);
    return FailedPrecondition("--state " + path + ": the state file is in use by another coordinator" +
                              (holder.empty() ? "" : " (" + holder + ")") + "; one coordinator per state file");
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    close(lock_fd);
    return Unavailable("--state " + path + ": cannot open: " + why);
  }
  auto store = std::make_unique<SqliteStateStore>(db, path, lock_fd);
  // WAL: readers never block the writer, and a committed transaction survives a process kill.
  for (const char* sql : {"PRAGMA journal_mode=WAL;", "PRAGMA synchronous=NORMAL;", "PRAGMA busy_timeout=5000;", kSchema}) {
    Status st = store->Exec(sql);
    if (!st.ok()) return Unavailable("--state " + path + ": not a usable pipecoord state file: " + st.message());
  }
  return std::unique_ptr<StateStore>(std::move(store));
}

SqliteStateStore::~SqliteStateStore() {
  sqlite3_close(db_);
  close(lock_fd_);  // releases the lock
}

Status SqliteStateStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    return Unavailable("state file " + path_ + ": " + why);
  }
  return Status::Ok();
}

namespace {

Status Done(Stmt& s, sqlite3* db, const std::string& path) {
  if (!s.ok() || s.Step() != SQLITE_DONE) return Unavailable("state file " + path + ": " + sqlite3_errmsg(db));
  return Status::Ok();
}

}  // namespace

Status SqliteStateStore::PutJob(const v1::Job& job) {
  Stmt s(db_, "INSERT INTO jobs (id, job) VALUES (?1, ?2) ON CONFLICT(id) DO UPDATE SET job = excluded.job");
  // Steps and events live in their own tables; the row keeps the rest.
  v1::Job row = job;
  row.clear_steps();
  row.clear_events();
  s.Text(1, job.id()).Blob(2, row.SerializeAsString());
  return Done(s, db_, path_);
}

Status SqliteStateStore::AppendEvent(const std::string& job_id, const std::string& event_bytes) {
  Stmt s(db_, "INSERT INTO events (job_id, event) VALUES (?1, ?2)");
  s.Text(1, job_id).Blob(2, event_bytes);
  return Done(s, db_, path_);
}

Status SqliteStateStore::AppendEvents(const std::vector<std::pair<std::string, std::string>>& events) {
  if (events.size() <= 1) return StateStore::AppendEvents(events);
  PIPECOORD_RETURN_IF_ERROR(Exec("BEGIN"));
  for (const auto& [job_id, bytes] : events) {
    if (Status st = AppendEvent(job_id, bytes); !st.ok()) {
      (void)Exec("ROLLBACK");
      return st;
    }
  }
  if (Status st = Exec("COMMIT"); !st.ok()) {
    (void)Exec("ROLLBACK");
    return st;
  }
  return Status::Ok();
}

Status SqliteStateStore::AppendStep(const std::string& job_id, const v1::StepRecord& step) {
  Stmt s(db_, "INSERT INTO steps (job_id, step) VALUES (?1, ?2)");
  s.Text(1, job_id).Blob(2, step.SerializeAsString());
  return Done(s, db_, path_);
}

Result<int64_t> SqliteStateStore::AppendTelemetry(const std::string& job_id, const v1::TelemetryBatch& batch) {
  Stmt s(db_, "INSERT INTO telemetry (job_id, batch) VALUES (?1, ?2)");
  s.Text(1, job_id).Blob(2, batch.SerializeAsString());
  PIPECOORD_RETURN_IF_ERROR(Done(s, db_, path_));
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

Status SqliteStateStore::AppendTelemetryRows(const std::vector<TelemetryRow>& rows, std::vector<int64_t>* seqs) {
  seqs->clear();
  if (rows.size() <= 1) return StateStore::AppendTelemetryRows(rows, seqs);
  PIPECOORD_RETURN_IF_ERROR(Exec("BEGIN"));
  for (const TelemetryRow& row : rows) {
    auto seq = AppendTelemetry(*row.job_id, *row.batch);
    if (!seq.ok()) {
      (void)Exec("ROLLBACK");
      seqs->clear();
      return seq.status();
    }
    seqs->push_back(*seq);
  }
  if (Status st = Exec("COMMIT"); !st.ok()) {
    (void)Exec("ROLLBACK");
    seqs->clear();
    return st;
  }
  return Status::Ok();
}

Status SqliteStateStore::DropTelemetryBefore(const std::string& job_id, int64_t seq) {
  Stmt s(db_, "DELETE FROM telemetry WHERE job_id = ?1 AND seq < ?2");
  s.Text(1, job_id).Int(2, seq);
  return Done(s, db_, path_);
}

Status SqliteStateStore::PutCheckpointedSteps(const std::string& job_id, int n) {
  Stmt s(db_, "INSERT OR REPLACE INTO checkpoints (job_id, steps) VALUES (?1, ?2)");
  s.Text(1, job_id).Int(2, n);
  return Done(s, db_, path_);
}

Status SqliteStateStore::PutWorker(const std::string& worker_id) {
  Stmt s(db_, "INSERT OR IGNORE INTO workers (id) VALUES (?1)");
  s.Text(1, worker_id);
  return Done(s, db_, path_);
}

Status SqliteStateStore::PutCounters(uint64_t next_job, uint64_t next_worker, uint64_t next_session, uint64_t epoch) {
  Stmt s(db_,
         "INSERT OR REPLACE INTO meta (key, value) VALUES ('next_job', ?1), ('next_worker', ?2), ('next_session', ?3), "
         "('epoch', ?4)");
  s.Int(1, static_cast<int64_t>(next_job)).Int(2, static_cast<int64_t>(next_worker)).Int(3, static_cast<int64_t>(next_session));
  s.Int(4, static_cast<int64_t>(epoch));
  return Done(s, db_, path_);
}

Status SqliteStateStore::DeleteJob(const std::string& job_id) {
  PIPECOORD_RETURN_IF_ERROR(Exec("BEGIN"));
  for (const char* sql : {"DELETE FROM jobs WHERE id = ?1", "DELETE FROM events WHERE job_id = ?1",
                          "DELETE FROM steps WHERE job_id = ?1", "DELETE FROM telemetry WHERE job_id = ?1",
                          "DELETE FROM checkpoints WHERE job_id = ?1"}) {
    Stmt s(db_, sql);
    s.Text(1, job_id);
    Status st = Done(s, db_, path_);
    if (!st.ok()) {
      Exec("ROLLBACK");
      return st;
    }
  }
  return Exec("COMMIT");
}

Result<StoredState> SqliteStateStore::Load(std::vector<std::vector<std::string>>* events_by_job) {
  StoredState out;
  std::map<std::string, size_t> index;
  {
    Stmt s(db_, "SELECT job FROM jobs ORDER BY seq");
    while (s.ok() && s.Step() == SQLITE_ROW) {
      v1::Job job;
      if (!job.ParseFromString(s.ColumnBytes(0))) return Unavailable("state file " + path_ + ": a job row does not parse");
      index[job.id()] = out.jobs.size();
      out.jobs.push_back(std::move(job));
    }
  }
  out.telemetry.resize(out.jobs.size());
  events_by_job->assign(out.jobs.size(), {});
  {
    Stmt s(db_, "SELECT job_id, step FROM steps ORDER BY seq");
    while (s.ok() && s.Step() == SQLITE_ROW) {
      auto it = index.find(s.ColumnBytes(0));
      if (it == index.end()) continue;
      if (!out.jobs[it->second].add_steps()->ParseFromString(s.ColumnBytes(1))) {
        return Unavailable("state file " + path_ + ": a step row does not parse");
      }
    }
  }
  {
    Stmt s(db_, "SELECT job_id, event FROM events ORDER BY seq");
    while (s.ok() && s.Step() == SQLITE_ROW) {
      auto it = index.find(s.ColumnBytes(0));
      if (it != index.end()) (*events_by_job)[it->second].push_back(s.ColumnBytes(1));
    }
  }
  {
    Stmt s(db_, "SELECT job_id, batch, seq FROM telemetry ORDER BY seq");
    while (s.ok() && s.Step() == SQLITE_ROW) {
      auto it = index.find(s.ColumnBytes(0));
      if (it == index.end()) continue;
      StoredBatch b;
      b.seq = s.ColumnInt(2);
      if (!b.batch.ParseFromString(s.ColumnBytes(1))) {
        return Unavailable("state file " + path_ + ": a telemetry row does not parse");
      }
      out.telemetry[it->second].push_back(std::move(b));
    }
  }
  {
    Stmt s(db_, "SELECT job_id, steps FROM checkpoints");
    while (s.ok() && s.Step() == SQLITE_ROW) {
      auto it = index.find(s.ColumnBytes(0));
      if (it != index.end()) out.jobs[it->second].set_checkpointed_steps(static_cast<int>(s.ColumnInt(1)));
    }
  }
  {
    Stmt s(db_, "SELECT id FROM workers ORDER BY id");
    while (s.ok() && s.Step() == SQLITE_ROW) out.worker_ids.push_back(s.ColumnBytes(0));
  }
  {
    Stmt s(db_, "SELECT key, value FROM meta");
    while (s.ok() && s.Step() == SQLITE_ROW) {
      const std::string key = s.ColumnBytes(0);
      const uint64_t v = static_cast<uint64_t>(s.ColumnInt(1));
      if (key == "next_job") out.next_job = v;
      if (key == "next_worker") out.next_worker = v;
      if (key == "next_session") out.next_session = v;
      if (key == "epoch") out.epoch = v;
    }
  }
  return out;
}

}  // namespace pipecoord::coordinator
