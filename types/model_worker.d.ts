/** The model request handlers of the worker, and how many models are loaded. */
export function modelHandlers(): {
    count: () => number;
    handlers: {
        /** {base | files, verify, cache, fusion} -> model info */
        loadModel(source: any, emit: any): Promise<{
            handle: any;
            name: any;
            layout: any;
            vision: boolean;
            imageSize: any;
            maxContext: any;
            hidden: any;
            vocab: any;
            stats: any;
        }>;
        /** {handle, prompt, image?, ...options} -> done fields; text events while it runs */
        generate({ handle, ...opts }: {
            [x: string]: any;
            handle: any;
        }, emit: any, signal: any): Promise<{
            type: string;
            tokenIds: any[];
            text: any;
            promptRows: number;
            reusedRows: any;
            computedRows: number;
            prefillWindows: any;
            prefillWindowsRun: number;
            prefillSubmits: number;
            newTokens: number;
            prefillTokensPerSecond: number;
            decodeTokensPerSecond: number;
            prefillSeconds: number;
            decodeSeconds: number;
            visionSeconds: number;
            samplingSeconds: number;
            stopReason: string;
        }>;
        resetModel({ handle }: {
            handle: any;
        }): Promise<void>;
        disposeModel({ handle }: {
            handle: any;
        }): Promise<void>;
    };
};
