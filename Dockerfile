# keyledger's image: the static binary, CA certificates and a passwd/group
# entry for UID/GID 10001, nothing else. FROM scratch needs no registry.
# Built by `make image` (hack/image.sh stages the build context: the binary
# from `make build`, the build host's CA bundle, passwd and group).
FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.title="keyledger" \
      org.opencontainers.image.description="Exactly-once operations on Kubernetes Secrets, journaled in PostgreSQL" \
      org.opencontainers.image.version="${VERSION}"
COPY passwd group /etc/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY keyledger /usr/local/bin/keyledger
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/keyledger"]
