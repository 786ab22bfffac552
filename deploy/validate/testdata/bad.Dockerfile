# Must be rejected by both Dockerfile linters: an unknown instruction and a port that is no number.
FROM debian:bookworm-slim
RUNN apt-get update
EXPOSE grpc
