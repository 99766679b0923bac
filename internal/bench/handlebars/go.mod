module github.com/capstan-dev/capstan/internal/bench/handlebars

go 1.26.5

require (
	github.com/capstan-dev/capstan v0.0.0
	github.com/mailgun/raymond/v2 v2.0.48
)

require (
	github.com/sirupsen/logrus v1.8.1 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/capstan-dev/capstan => ../../..
