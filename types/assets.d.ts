export function pyodideFiles(): {
    loader: string;
    module: string;
    wasm: string;
    stdlib: string;
};
export function lockFileURL(): string;
export function wheelURLs(): {
    'webpte-0.1.0-py3-none-any.whl': string;
    'jinja2-3.1.6-py3-none-any.whl': string;
    'markupsafe-3.0.3-py3-none-any.whl': string;
    'flatbuffers-25.12.19-py2.py3-none-any.whl': string;
};
export function tokenizersURL(): string;
