"""A small helper over the generated JobService stub: submit, get, list, watch, cancel."""
import grpc
from google.protobuf import json_format

from proto import job_pb2, job_pb2_grpc

TERMINAL_STATES = (job_pb2.SUCCEEDED, job_pb2.FAILED, job_pb2.CANCELLED)


class JobFailed(Exception):
    """A watched job ended in FAILED or CANCELLED."""


class Client:
    """A connection to the coordinator's JobService.

    Without root_certificates the channel is plaintext (a local development coordinator). With
    them (the PEM CA that signed the coordinator's certificate, bytes or str) it is TLS; token
    is then sent as "authorization: Bearer TOKEN" on every call, as submit and cancel need it.
    A token without root_certificates is refused: it is only ever sent over TLS.
    """

    def __init__(self, address, timeout_s=30.0, *, token=None, root_certificates=None):
        if root_certificates is None:
            if token:
                raise ValueError("token: needs root_certificates: a token is only ever sent over TLS")
            self._channel = grpc.insecure_channel(address)
        else:
            if isinstance(root_certificates, str):
                root_certificates = root_certificates.encode()
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            if token:
                credentials = grpc.composite_channel_credentials(
                    credentials, grpc.access_token_call_credentials(token))
            self._channel = grpc.secure_channel(address, credentials)
        self._stub = job_pb2_grpc.JobServiceStub(self._channel)
        self._timeout = timeout_s

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def submit(self, spec):
        """Submits a JobSpec (a message, or a dict in protobuf's JSON mapping); returns the id.

        Raises grpc.RpcError with INVALID_ARGUMENT naming the field for a bad spec, and
        UNAUTHENTICATED without the coordinator's token (when it has one)."""
        if isinstance(spec, dict):
            spec = json_format.ParseDict(spec, job_pb2.JobSpec())
        response = self._stub.SubmitJob(job_pb2.SubmitJobRequest(spec=spec), timeout=self._timeout)
        return response.job_id

    def get(self, job_id):
        return self._stub.GetJob(job_pb2.GetJobRequest(job_id=job_id), timeout=self._timeout)

    def jobs(self):
        return list(self._stub.ListJobs(job_pb2.ListJobsRequest(), timeout=self._timeout).jobs)

    def cancel(self, job_id):
        return self._stub.CancelJob(job_pb2.CancelJobRequest(job_id=job_id), timeout=self._timeout).state

    def watch(self, job_id):
        """Yields JobUpdate messages (state changes, steps, events) until the job ends."""
        for update in self._stub.WatchJob(job_pb2.WatchJobRequest(job_id=job_id)):
            yield update

    def wait(self, job_id):
        """Follows the job to its end; returns the final Job, raises JobFailed unless it succeeded."""
        for _ in self.watch(job_id):
            pass
        job = self.get(job_id)
        if job.state != job_pb2.SUCCEEDED:
            raise JobFailed(f"{job_id} {job_pb2.JobState.Name(job.state)}: {job.failure_cause}")
        return job
