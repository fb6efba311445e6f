# natsd in a small static image laid out like the official nats image (nats:scratch):
# /nats-server with its config at /nats-server.conf, ports 4222/8222/6222, and the same
# ENTRYPOINT and CMD, so `docker run natsd -js` and manifests written for nats work unchanged.
#
#   docker build --build-arg COMMIT=$(git rev-parse --short HEAD) -t natsd .    (or: make docker)
#
# The build step is docker/build-rootfs.sh, which packaging/packaging_test.go also runs.

FROM golang:1.26 AS builder
ARG VERSION=
ARG COMMIT=
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN VERSION="$VERSION" COMMIT="$COMMIT" ./docker/build-rootfs.sh /rootfs

FROM scratch
ENV PATH="$PATH:/"
# Certificate authorities for TLS verification against the system pool.
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
# /nats-server, /natsd (a symlink to it), /nats-server.conf, /etc/nats/nats-server.conf.
COPY --from=builder /rootfs/ /

# 6222 is the official image's cluster port: the default config here has no cluster block
# (docker/nats-server.conf says why), so nothing listens there unless a mounted config adds one.
EXPOSE 4222 8222 6222
ENTRYPOINT ["/nats-server"]
CMD ["--config", "nats-server.conf"]
