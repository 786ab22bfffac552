# Must be rejected by hadolint (DL3011): no UNIX port is above 65535.
FROM debian:bookworm-slim
EXPOSE 70000
