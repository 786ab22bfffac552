# Must be rejected by hadolint (a parse error): RUNN is no instruction.
FROM debian:bookworm-slim
RUNN apt-get update
