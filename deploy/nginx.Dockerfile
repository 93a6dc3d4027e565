# nginx as Debian ships it, for docker-compose.yml; the configuration is
# mounted from nginx.conf.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends nginx-light \
    && rm -rf /var/lib/apt/lists/*
EXPOSE 8080
STOPSIGNAL SIGQUIT
CMD ["nginx", "-c", "/etc/nginx/nginx.conf", "-g", "daemon off;"]
