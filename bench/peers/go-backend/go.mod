module lila.bench/go-backend

go 1.22
