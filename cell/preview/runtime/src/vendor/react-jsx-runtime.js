// "react/jsx-runtime" of the import map: what compiled JSX calls (the automatic runtime).
import runtime from "react/jsx-runtime";

export const { Fragment, jsx, jsxs } = runtime;
