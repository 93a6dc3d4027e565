# Builds the appserver daemon into a small image (curl is there for the
# compose healthcheck, and for the agent).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/appserver ./cmd/appserver

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl git ripgrep bubblewrap \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /var/lib/appserver appserver
COPY --from=build /out/appserver /usr/local/bin/appserver
USER appserver
WORKDIR /var/lib/appserver
EXPOSE 7878
ENTRYPOINT ["/usr/local/bin/appserver"]
CMD ["serve"]
