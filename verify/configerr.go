package verify

import (
	"fmt"

	"github.com/capstan-dev/capstan/agenterr"
)

func configErr(file, ptr, hint, format string, args ...any) error {
	return &agenterr.Error{Code: agenterr.CodeConfigurationValidation, Layer: agenterr.LayerConfiguration,
		Message: fmt.Sprintf(format, args...), File: file, Pointer: ptr, Hint: hint}
}
